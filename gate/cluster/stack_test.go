package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
)

// control is a control instance running in the test process.
type control struct {
	*stack.Control
	name string
}

// startControl runs control with cfg as instance name and returns once its
// API listens; it stops (draining) when the test ends.
func startControl(t testing.TB, name string, cfg controlserver.Config) *control {
	t.Helper()
	cfg.Instance = name
	return &control{Control: stack.NewControl(t, cfg), name: name}
}

// edge is an edge running in the test process. Restart keeps its address,
// so the load keeps asking the same URL.
type edge struct {
	*stack.Edge
	name string
	log  *feedLog
}

func startEdge(t testing.TB, name string, cfg edgeserver.Config) *edge {
	t.Helper()
	e := &edge{name: name, log: &feedLog{}}
	cfg.Name = name
	cfg.Log = slog.New(e.log)
	var err error
	if e.Edge, err = stack.StartEdge(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("edge %s: %v; goroutines: %s", name, err, dumpStacks(name))
		}
	})
	return e
}

// restart stops the edge and starts it again on the same address and
// snapshot folder: it boots from its local snapshot and replays the rest.
func (e *edge) restart(t testing.TB) {
	t.Helper()
	if err := e.Restart(context.Background()); err != nil {
		t.Fatalf("restart edge %s: %v", e.name, err)
	}
}

// startNode brings NATS node i back and waits until the cluster is healthy.
func startNode(t testing.TB, nc *stack.NATS, i int) {
	t.Helper()
	if err := nc.StartNode(context.Background(), i); err != nil {
		t.Fatal(err)
	}
}

// dumpStacks writes every goroutine's stack to a file and returns its name,
// for a component that did not stop.
func dumpStacks(what string) string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	f, err := os.CreateTemp("", "edgelink-gate-stacks-"+what+"-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	_, _ = f.Write(buf)
	return f.Name()
}

// feedLog is the edge's log handler: it drops everything but counts what
// says the change feed lost events, so a gap cannot hide behind the feed's
// own gap counter, which a re-sync from a snapshot resets.
type feedLog struct {
	gaps, resyncs atomic.Int64
	firstGap      atomic.Pointer[string]
}

func (h *feedLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *feedLog) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *feedLog) WithGroup(string) slog.Handler                { return h }
func (h *feedLog) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.HasPrefix(r.Message, "change feed gap"), strings.HasPrefix(r.Message, "change feed lost events"):
		h.gaps.Add(1)
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		s := b.String()
		h.firstGap.CompareAndSwap(nil, &s)
	case strings.HasPrefix(r.Message, "change feed re-synced"):
		h.resyncs.Add(1)
	}
	return nil
}

// streamInfo polls for stream's info (it may be electing a leader).
func streamInfo(t testing.TB, js jetstream.JetStream, stream string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	var err error
	if perr := stack.Poll(context.Background(), "stream info", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var s jetstream.Stream
		if s, err = js.Stream(ctx, stream); err == nil {
			info, err = s.Info(ctx)
		}
		return err == nil && info.Cluster != nil && info.Cluster.Leader != ""
	}); perr != nil {
		t.Fatalf("stream %s: no info with a leader after 1m: %v", stream, err)
	}
	return info
}

// replicasOf says how stream is replicated: its configured count and the
// servers holding it (leader first).
func replicasOf(info *jetstream.StreamInfo) (configured int, servers []string) {
	servers = append(servers, info.Cluster.Leader)
	for _, p := range info.Cluster.Replicas {
		servers = append(servers, p.Name)
	}
	return info.Config.Replicas, servers
}
