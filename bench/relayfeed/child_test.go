package relayfeedbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// childEnv selects the edge process's mode: "stream" applies the change
// stream from its start; "snapshot" boots from the file in RELAYFEED_FILE
// and follows the stream after its position. RELAYFEED_NATS is the
// server, RELAYFEED_LINKS the links (IDs 1 to n, applied up to version n).
const childEnv = "RELAYFEED_CHILD"

// runChild is an edge's store and change feed, as edgeserver wires them,
// without the HTTP server (the same in both modes). It prints "started",
// then "applied" once it holds every link, then reads every link once as a
// serving edge would and prints "served", and exits when stdin closes.
func runChild(mode string) error {
	n, err := strconv.Atoi(os.Getenv("RELAYFEED_LINKS"))
	if err != nil {
		return fmt.Errorf("RELAYFEED_LINKS: %w", err)
	}
	nc, err := nats.Connect(os.Getenv("RELAYFEED_NATS"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	layers := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(4_000_000, 0.01),
		Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
	feed := changefeed.New(js, layers, nil)
	if mode == "snapshot" {
		l, err := store.LoadFile("bench", os.Getenv("RELAYFEED_FILE"))
		if err != nil {
			return err
		}
		layers.Install(l)
		if err := l.Verify(context.Background()); err != nil {
			return err
		}
		feed.Restart(l.Snap.Header.StreamSeq, l.Snap.Header.ChangeVersion)
	} else if mode != "stream" {
		return fmt.Errorf("unknown mode %q", mode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	fmt.Println("started")
	in := bufio.NewScanner(os.Stdin)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for feed.Position().Version < uint64(n) {
		select {
		case err := <-done:
			return fmt.Errorf("feed stopped: %v", err)
		case <-tick.C:
		}
	}
	fmt.Println("applied")
	var (
		code [base62.Length]byte
		buf  []byte
	)
	for id := uint64(1); id <= uint64(n); id++ {
		if err := base62.Put(code[:], id); err != nil {
			return err
		}
		h, ok := layers.Find(link.DefaultDomain, code[:])
		if !ok {
			return fmt.Errorf("%s missing", code)
		}
		if h.Overlay {
			buf = h.Rec.AppendURL(buf[:0])
		} else {
			buf = h.Snap.AppendURL(buf[:0])
		}
	}
	st := layers.Overlay.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("served overlay_entries=%d overlay_record_bytes=%d overlay_index_bytes=%d heap_inuse=%d heap_retained=%d gc_cycles=%d\n",
		st.Entries, st.RecordBytes, st.IndexBytes, ms.HeapInuse, ms.HeapSys-ms.HeapReleased, ms.NumGC)
	if path := os.Getenv("RELAYFEED_HEAPPROFILE"); path != "" && mode == "stream" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
	}
	for in.Scan() {
	}
	return nil
}
