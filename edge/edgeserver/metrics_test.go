package edgeserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// snapshotFile is a snapshot at change version 10 of n links whose targets
// end in "?v=10"; damaged flips a bit of the last target, which only the
// background verification reads.
func snapshotFile(t *testing.T, n int, damaged bool) []byte {
	t.Helper()
	links := make([]snapshot.Link, n)
	for i := range links {
		links[i] = snapshot.Link{Code: fmt.Sprintf("m-%05d", i), URL: fmt.Sprintf("https://shop.example.com/%d?v=10", i),
			RedirectType: 302, Status: link.Active}
	}
	data, err := snapshottest.Build(links, snapshot.Header{ChangeVersion: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if damaged {
		data[bytes.LastIndex(data, []byte("?v=10"))+3] ^= 0x01
	}
	return data
}

// TestMetricsShowWithdrawnSnapshot: an edge booted from a local copy
// damaged on disk exports it as withdrawn (one withdrawal, readiness
// failing) once the background verification refuses it, and as verified
// (one refetch) once a good snapshot is published and fetched.
func TestMetricsShowWithdrawnSnapshot(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	natstest.ChangeStream(t, js)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), snapshotFile(t, 200, true), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), Name: "metrics-snapshot",
			SnapshotDir: dir, SnapshotPoll: 100 * time.Millisecond, OnListen: func(a net.Addr) { addr <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String() + "/-"
	case err := <-done:
		t.Fatalf("edge stopped before it listened: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("edge did not listen within 60s")
	}

	// value scrapes the edge and returns name{labels}, -1 when absent.
	value := func(name string, labels ...string) float64 {
		fams, err := scrape.Scrape(base + "/metrics")
		if err != nil {
			return -1
		}
		v, ok := scrape.Value(fams, name, labels...)
		if !ok {
			return -1
		}
		return v
	}
	state := func(want string) func() bool {
		return func() bool { return value("edge_snapshot_state", "state", want) == 1 }
	}
	poll.Until(t, "the damaged local copy exported as withdrawn", 60*time.Second, state("withdrawn"))
	for _, other := range []string{"none", "unverified", "verifying", "verified"} {
		if v := value("edge_snapshot_state", "state", other); v != 0 {
			t.Errorf("edge_snapshot_state{state=%q} = %v while withdrawn, want 0", other, v)
		}
	}
	if w, r := value("edge_snapshot_withdrawals_total"), value("edge_snapshot_refetches_total"); w != 1 || r != 0 {
		t.Errorf("while withdrawn: withdrawals %v, refetches %v; want 1, 0", w, r)
	}
	if v := value("edge_snapshot_rejected_total"); v != 1 {
		t.Errorf("edge_snapshot_rejected_total = %v, want 1", v)
	}
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz while withdrawn: %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
	}

	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: snapshot.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, snapshot.ObjectName(10), snapshotFile(t, 200, false)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the good snapshot exported as verified", 60*time.Second, state("verified"))
	if w, r := value("edge_snapshot_withdrawals_total"), value("edge_snapshot_refetches_total"); w != 1 || r != 1 {
		t.Errorf("after the refetch: withdrawals %v, refetches %v; want 1, 1", w, r)
	}
	if v := value("edge_snapshot_state", "state", "withdrawn"); v != 0 {
		t.Errorf("edge_snapshot_state{state=\"withdrawn\"} = %v after the refetch, want 0", v)
	}
	// The overlay's parts are exported (nothing came by the stream: no
	// records, nothing refused), and the lock is off by default.
	for _, part := range []string{"records", "garbage", "index"} {
		if v := value("edge_overlay_bytes", "part", part); v < 0 {
			t.Errorf("edge_overlay_bytes{part=%q} not exported", part)
		}
	}
	if v := value("edge_overlay_refused_total"); v != 0 {
		t.Errorf("edge_overlay_refused_total = %v, want 0", v)
	}
	if v := value("edge_snapshot_locked"); v != 0 {
		t.Errorf("edge_snapshot_locked = %v without --lock-snapshot, want 0", v)
	}
}
