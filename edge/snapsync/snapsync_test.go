package snapsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// fakeFeed records where the syncer positions it.
type fakeFeed struct {
	mu       sync.Mutex
	seq, ver uint64
	restarts int
	complete atomic.Bool
}

func newFeed() *fakeFeed { f := &fakeFeed{}; f.complete.Store(true); return f }

func (f *fakeFeed) Restart(seq, version uint64) {
	f.mu.Lock()
	f.seq, f.ver, f.restarts = seq, version, f.restarts+1
	f.mu.Unlock()
	f.complete.Store(true)
}
func (f *fakeFeed) Complete() bool { return f.complete.Load() }
func (f *fakeFeed) Position() changefeed.Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	return changefeed.Position{Seq: f.seq, Version: f.ver}
}
func (f *fakeFeed) at() (seq, ver uint64, restarts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq, f.ver, f.restarts
}

func newLayers() *store.Layers {
	return &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments),
		Snapshots: new(store.Snapshots)}
}

// file is a snapshot at version v whose every link targets a URL naming v.
func file(t *testing.T, v uint64, n int) []byte {
	t.Helper()
	links := make([]snapshot.Link, n)
	for i := range links {
		links[i] = snapshot.Link{Code: fmt.Sprintf("c-%05d", i), URL: fmt.Sprintf("https://shop.example.com/%d?v=%d", i, v),
			RedirectType: 302, Status: link.Active}
	}
	data, err := snapshottest.Build(links, snapshot.Header{ChangeVersion: v, StreamSeq: v + 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func publish(t *testing.T, js jetstream.JetStream, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	obs, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: snapshot.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		t.Fatal(err)
	}
}

func target(t *testing.T, l *store.Layers, code string) string {
	t.Helper()
	e, ok := l.Snapshots.Lookup(link.DefaultDomain, []byte(code))
	if !ok {
		return ""
	}
	return string(e.AppendURL(nil))
}

func TestBootFromBucketKeepsLocalCopy(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	publish(t, js, snapshot.ObjectName(10), file(t, 10, 100))
	publish(t, js, snapshot.ObjectName(20), file(t, 20, 100))
	dir := t.TempDir()
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: dir})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seq, ver, _ := feed.at(); seq != 120 || ver != 20 {
		t.Fatalf("feed positioned at seq %d version %d, want 120, 20", seq, ver)
	}
	if got := target(t, layers, "c-00007"); got != "https://shop.example.com/7?v=20" {
		t.Fatalf("c-00007 → %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshot.ObjectName(20))); err != nil {
		t.Fatalf("no local copy: %v", err)
	}

	// Boot again with NATS down: the local copy serves at once.
	ns.Stop()
	poll.Until(t, "the client to see NATS stopped", 10*time.Second, func() bool { return !nc.IsConnected() })
	layers2, feed2 := newLayers(), newFeed()
	s2 := New(js, layers2, feed2, Config{Dir: dir, BootWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s2.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := target(t, layers2, "c-00042"); got != "https://shop.example.com/42?v=20" {
		t.Fatalf("after a boot from disk with NATS down, c-00042 → %q", got)
	}
	if seq, _, _ := feed2.at(); seq != 120 {
		t.Fatalf("feed positioned at %d, want 120", seq)
	}
}

// TestRejectsBadSnapshots: a corrupt, a truncated and a mismatched snapshot
// in the bucket are each refused with their own error, and the edge keeps
// the one in service; a good newer one then swaps in.
func TestRejectsBadSnapshots(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	publish(t, js, snapshot.ObjectName(10), file(t, 10, 50))
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: t.TempDir()})
	ctx := context.Background()
	if err := s.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	corrupt := file(t, 20, 50)
	corrupt[bytes.LastIndex(corrupt, []byte("?v=20"))+3] ^= 0x01 // a target's byte
	truncated := file(t, 30, 50)
	truncated = truncated[:len(truncated)-100]
	mismatched := file(t, 10, 50)
	for _, tt := range []struct {
		name string
		v    uint64
		data []byte
		want error
		text string
	}{
		{"corrupt", 20, corrupt, snapshot.ErrCorrupt, "checksum mismatch"},
		{"truncated", 30, truncated, snapshot.ErrCorrupt, "-byte file"},
		{"mismatched", 40, mismatched, ErrMismatch, "header says change version 10"},
	} {
		publish(t, js, snapshot.ObjectName(tt.v), tt.data)
		before := s.Rejected.Load()
		if err := s.Sync(ctx); err != nil {
			t.Fatalf("%s: Sync: %v", tt.name, err)
		}
		err := s.LastRejection()
		if s.Rejected.Load() != before+1 || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: rejection %v (count %d→%d), want %v mentioning %q", tt.name, err, before, s.Rejected.Load(), tt.want, tt.text)
		}
		t.Logf("%s: %v", tt.name, err)
		if cur := layers.Snapshots.Current(); cur.Snap.Header.ChangeVersion != 10 {
			t.Fatalf("%s: snapshot in service is version %d, want 10 kept", tt.name, cur.Snap.Header.ChangeVersion)
		}
	}
	// A refused object is not downloaded again.
	before := s.Rejected.Load()
	if err := s.Sync(ctx); err != nil || s.Rejected.Load() != before {
		t.Fatalf("refused objects were fetched again: %v, rejected %d→%d", err, before, s.Rejected.Load())
	}
	publish(t, js, snapshot.ObjectName(50), file(t, 50, 50))
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := target(t, layers, "c-00001"); got != "https://shop.example.com/1?v=50" {
		t.Fatalf("good newer snapshot not swapped in: c-00001 → %q", got)
	}
}

func TestCorruptLocalCopyFallsBackToBucket(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	publish(t, js, snapshot.ObjectName(10), file(t, 10, 20))
	dir := t.TempDir()
	bad := file(t, 30, 20)
	bad[200] ^= 0xff
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(30)), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: dir})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.LastRejection(); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("corrupt local copy: rejection %v", err)
	}
	if v := layers.Snapshots.Current().Snap.Header.ChangeVersion; v != 10 {
		t.Fatalf("booted version %d, want the bucket's 10", v)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshot.ObjectName(30)+".rejected")); err != nil {
		t.Fatalf("rejected local copy not set aside: %v", err)
	}
}

func TestBootWithoutSnapshotsReplaysEverything(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: t.TempDir()})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, restarts := feed.at(); restarts != 0 || !s.Booted() || layers.Snapshots.Current() != nil {
		t.Fatalf("booted=%v restarts=%d: want booted without a snapshot and the feed left at the start", s.Booted(), restarts)
	}
}

// TestResyncAfterLostEvents: a feed that lost events is repositioned after
// the newest snapshot that still meets the stream, once per snapshot.
func TestResyncAfterLostEvents(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	ctx := context.Background()
	stream := natstest.ChangeStream(t, js)
	for range 150 {
		if _, err := js.Publish(ctx, linkevent.Subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, js, snapshot.ObjectName(10), file(t, 10, 20)) // stream seq 110
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{})
	if err := s.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	feed.Restart(140, 40) // the feed moved on
	// Lost events, and the snapshot still meets the stream: replay from it.
	feed.complete.Store(false)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if seq, _, _ := feed.at(); seq != 110 || s.Resyncs.Load() != 1 {
		t.Fatalf("feed at %d after %d re-syncs, want 110 after 1", seq, s.Resyncs.Load())
	}
	// Retention moved past the snapshot: nothing to do until a newer one.
	if err := stream.Purge(ctx, jetstream.WithPurgeSequence(130)); err != nil {
		t.Fatal(err)
	}
	feed.complete.Store(false)
	_, _, restarts := feed.at()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, r := feed.at(); r != restarts {
		t.Fatal("re-synced from a snapshot older than the stream")
	}
	publish(t, js, snapshot.ObjectName(35), file(t, 35, 20)) // stream seq 135
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if seq, ver, _ := feed.at(); seq != 135 || ver != 35 || s.Resyncs.Load() != 2 {
		t.Fatalf("feed at %d/%d after %d re-syncs, want 135/35 after 2", seq, ver, s.Resyncs.Load())
	}
}

// TestRunSwapsUnderLookups: Run notices published snapshots through the
// watch, and concurrent lookups always find every code, with a target of
// one whole snapshot never older than one seen before, while it swaps:
// snapshots held in memory, and snapshots downloaded to the folder and
// read in place, whose older copies leave the folder.
func TestRunSwapsUnderLookups(t *testing.T) {
	for _, mode := range []string{"in memory", "mapped"} {
		t.Run(mode, func(t *testing.T) {
			ns := natstest.Start(t)
			_, js := ns.Connect(t)
			publish(t, js, snapshot.ObjectName(1), file(t, 1, 500))
			cfg := Config{Poll: time.Hour}
			if mode == "mapped" {
				cfg.Dir = t.TempDir()
			}
			layers, feed := newLayers(), newFeed()
			s := New(js, layers, feed, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			if err := s.Boot(ctx); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.Run(ctx) }()
			var bad atomic.Int64
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf []byte
					seen := uint64(0)
					for i := 0; ctx.Err() == nil; i++ {
						code := fmt.Appendf(nil, "c-%05d", i%500)
						e, ok := layers.Snapshots.Lookup(link.DefaultDomain, code)
						var n int
						var v uint64
						if !ok {
							bad.Add(1)
						} else if _, err := fmt.Sscanf(string(e.AppendURL(buf[:0])), "https://shop.example.com/%d?v=%d", &n, &v); err != nil || n != i%500 || v < seen {
							bad.Add(1)
						} else {
							seen = v
						}
						if i%1000 == 0 {
							runtime.GC() // let retired files be collected while lookups run
						}
					}
				}()
			}
			t.Cleanup(func() { cancel(); wg.Wait() })
			for v := uint64(2); v <= 6; v++ {
				publish(t, js, snapshot.ObjectName(v), file(t, v, 500))
				poll.Until(t, fmt.Sprintf("snapshot %d swapped in", v), 30*time.Second, func() bool {
					return layers.Snapshots.Current().Snap.Header.ChangeVersion == v
				})
			}
			if n := bad.Load(); n != 0 {
				t.Fatalf("%d lookups missed or answered wrongly during swaps", n)
			}
			if mode == "mapped" {
				if cur := layers.Snapshots.Current(); runtime.GOOS == "linux" && !cur.Snap.Mapped() || !cur.Snap.Verified() {
					t.Fatalf("downloaded snapshot: mapped %v verified %v", cur.Snap.Mapped(), cur.Snap.Verified())
				}
				ents, _ := os.ReadDir(cfg.Dir)
				if len(ents) != 1 || ents[0].Name() != snapshot.ObjectName(6) {
					t.Fatalf("folder holds %v, want only the copy in service", ents)
				}
			}
		})
	}
}

// damaged is a snapshot at version v whose targets were damaged after it
// was written (on disk, say): its header and small sections are intact.
func damaged(t *testing.T, v uint64, n int) []byte {
	t.Helper()
	data := file(t, v, n)
	data[bytes.LastIndex(data, []byte(fmt.Sprintf("?v=%d", v)))+3] ^= 0x01
	return data
}

// TestBootServesLocalCopyBeforeVerifying: an edge booting from its local
// copy serves it at once, unverified, and VerifyInService then verifies it
// without swapping anything; a download a crash left behind is removed.
func TestBootServesLocalCopyBeforeVerifying(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), file(t, 10, 50), 0o644); err != nil {
		t.Fatal(err)
	}
	interrupted := filepath.Join(dir, tmpPrefix+snapshot.ObjectName(20)+"-123")
	if err := os.WriteFile(interrupted, []byte("half a download"), 0o644); err != nil {
		t.Fatal(err)
	}
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: dir})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(interrupted); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a download a crash interrupted is still in the folder: %v", err)
	}
	cur := layers.Snapshots.Current()
	if !s.Booted() || cur == nil || cur.Snap.Verified() || target(t, layers, "c-00003") != "https://shop.example.com/3?v=10" {
		t.Fatalf("booted %v, snapshot %v: want the local copy serving before it is verified", s.Booted(), cur)
	}
	if st := s.State(); st != StateUnverified {
		t.Fatalf("state before the verification = %v, want unverified", st)
	}
	if err := s.VerifyInService(context.Background()); err != nil || !cur.Snap.Verified() || layers.Snapshots.Current() != cur || s.Rejected.Load() != 0 {
		t.Fatalf("VerifyInService: %v (verified %v, rejected %d)", err, cur.Snap.Verified(), s.Rejected.Load())
	}
	if st, w := s.State(), s.Withdrawals.Load(); st != StateVerified || w != 0 {
		t.Fatalf("after the verification: state %v, %d withdrawals; want verified, none", st, w)
	}
}

// TestCorruptLocalCopyIsWithdrawnAndRefetched: a local copy damaged on disk
// serves after boot (only its entry sections are damaged), the background
// verification refuses it, takes it out of service at once and sets it
// aside, the edge reports itself not booted meanwhile, and Run fetches the
// bucket's good copy of the same version and replays the stream from it.
func TestCorruptLocalCopyIsWithdrawnAndRefetched(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	publish(t, js, snapshot.ObjectName(10), file(t, 10, 50))
	dir := t.TempDir()
	local := filepath.Join(dir, snapshot.ObjectName(10))
	if err := os.WriteFile(local, damaged(t, 10, 50), 0o644); err != nil {
		t.Fatal(err)
	}
	layers, feed := newLayers(), newFeed()
	s := New(js, layers, feed, Config{Dir: dir, GapCheck: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	bad := layers.Snapshots.Current()
	if bad == nil || bad.Snap.Verified() || bad.Name != local {
		t.Fatalf("booted from %v, want the local copy, unverified", bad)
	}
	feed.Restart(140, 40) // the feed moved on since the boot

	err := s.VerifyInService(ctx)
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("VerifyInService = %v, want a checksum mismatch", err)
	}
	if layers.Snapshots.Current() != nil || s.Booted() || s.Rejected.Load() != 1 || !errors.Is(s.LastRejection(), snapshot.ErrCorrupt) {
		t.Fatalf("after the mismatch: in service %v, booted %v, rejected %d (%v); want it withdrawn, not booted, refused",
			layers.Snapshots.Current(), s.Booted(), s.Rejected.Load(), s.LastRejection())
	}
	if _, err := os.Stat(local + ".rejected"); err != nil {
		t.Fatalf("the corrupt copy was not set aside: %v", err)
	}
	if st, w, r := s.State(), s.Withdrawals.Load(), s.Refetches.Load(); st != StateWithdrawn || w != 1 || r != 0 {
		t.Fatalf("after the mismatch: state %v, %d withdrawals, %d refetches; want withdrawn, 1, 0", st, w, r)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	poll.Until(t, "a good snapshot in service", 30*time.Second, func() bool { return s.Booted() && layers.Snapshots.Current() != nil })
	cur := layers.Snapshots.Current()
	if !cur.Snap.Verified() || target(t, layers, "c-00007") != "https://shop.example.com/7?v=10" {
		t.Fatalf("in service after the re-fetch: %s verified %v, c-00007 → %q", cur.Name, cur.Snap.Verified(), target(t, layers, "c-00007"))
	}
	if seq, ver, _ := feed.at(); seq != 110 || ver != 10 {
		t.Fatalf("feed at %d/%d after the re-fetch, want it replaying from the snapshot at 110/10", seq, ver)
	}
	if st, w, r := s.State(), s.Withdrawals.Load(), s.Refetches.Load(); st != StateVerified || w != 1 || r != 1 {
		t.Fatalf("after the re-fetch: state %v, %d withdrawals, %d refetches; want verified, 1, 1", st, w, r)
	}
	if data, err := os.ReadFile(local); err != nil || !bytes.Equal(data, file(t, 10, 50)) {
		t.Fatalf("the good copy was not kept on disk: %v", err)
	}
}

// TestForeignLocalCopyIsIgnored: a local copy built from another change
// stream (another cluster, or before the stream was reset) is never served;
// the edge replays this stream instead.
func TestForeignLocalCopyIsIgnored(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	for v := uint64(1); v <= 3; v++ {
		natstest.PublishChange(t, js, &linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Code: "c-00001",
			URL: "https://this-stream.example/", RedirectType: 302, Status: link.Active})
	}
	for _, tc := range []struct {
		name      string
		ver, seq  uint64
		wantMatch string
	}{
		{"other version at its sequence", 20, 2, "holds version 2"},
		{"sequence beyond the stream", 3, 50, "stream ends at 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := snapshottest.Build([]snapshot.Link{{Code: "c-00001", URL: "https://other-cluster.example/", RedirectType: 302, Status: link.Active}},
				snapshot.Header{ChangeVersion: tc.ver, StreamSeq: tc.seq}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(tc.ver)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			layers, feed := newLayers(), newFeed()
			s := New(js, layers, feed, Config{Dir: dir, BootWait: 2 * time.Second})
			if err := s.Boot(ctx); err != nil {
				t.Fatal(err)
			}
			if got := target(t, layers, "c-00001"); got != "" {
				t.Fatalf("served %q from a foreign snapshot", got)
			}
			if err := s.LastRejection(); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), tc.wantMatch) {
				t.Fatalf("rejection = %v, want ErrForeign mentioning %q", err, tc.wantMatch)
			}
			if _, _, restarts := feed.at(); restarts != 0 {
				t.Fatalf("feed repositioned after a foreign snapshot; it must replay the stream from its start")
			}
		})
	}
}

// TestLocalCopyAtBatchPosition: a snapshot's position is a message's
// sequence with the version of its last event, whether the message is one
// JSON event (an old control) or a batch; the version of an event inside a
// batch at that sequence is not a position of this stream.
func TestLocalCopyAtBatchPosition(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	ev := func(v uint64) linkevent.Event {
		return linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Code: "c-00001",
			URL: fmt.Sprintf("https://this-stream.example/%d", v), RedirectType: 302, Status: link.Active}
	}
	for v := uint64(1); v <= 3; v++ {
		e := ev(v)
		natstest.PublishChange(t, js, &e)
	}
	batchSeq := natstest.PublishChanges(t, js, ev(4), ev(5), ev(6), ev(7), ev(8))
	natstest.PublishChanges(t, js, ev(9), ev(10))
	for _, tc := range []struct {
		name     string
		ver, seq uint64
		foreign  string // what the rejection says; "" when the copy is served
	}{
		{"last version of a batch", 8, batchSeq, ""},
		{"an old control's single event", 2, 2, ""},
		{"inner version of a batch", 6, batchSeq, "holds version 8"},
		{"first version of a batch", 4, batchSeq, "holds version 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := snapshottest.Build([]snapshot.Link{{Code: "c-00001", URL: "https://snapshot.example/", RedirectType: 302, Status: link.Active}},
				snapshot.Header{ChangeVersion: tc.ver, StreamSeq: tc.seq}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(tc.ver)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			layers, feed := newLayers(), newFeed()
			s := New(js, layers, feed, Config{Dir: dir, BootWait: 2 * time.Second})
			if err := s.Boot(ctx); err != nil {
				t.Fatal(err)
			}
			seq, ver, restarts := feed.at()
			if tc.foreign == "" {
				if got := target(t, layers, "c-00001"); got != "https://snapshot.example/" || s.LastRejection() != nil {
					t.Fatalf("served %q, rejection %v; want the local copy served", got, s.LastRejection())
				}
				if seq != tc.seq || ver != tc.ver || restarts != 1 {
					t.Fatalf("feed positioned at sequence %d version %d (%d restarts), want %d, %d", seq, ver, restarts, tc.seq, tc.ver)
				}
				return
			}
			if err := s.LastRejection(); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), tc.foreign) {
				t.Fatalf("rejection = %v, want ErrForeign mentioning %q", err, tc.foreign)
			}
			if got := target(t, layers, "c-00001"); got != "" || restarts != 0 {
				t.Fatalf("served %q (%d restarts) from a snapshot at no position of this stream", got, restarts)
			}
		})
	}
}

// TestLockSnapshot: with LockSnapshot, the snapshot in service is locked in
// memory once verified and off the start-up path (a local copy after its
// background verification, a download when Run starts), a snapshot swapped
// in is locked and the one it replaced unlocked; without it nothing is.
func TestLockSnapshot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("snapshots are mapped, so lockable, on Linux only")
	}
	for _, lock := range []bool{false, true} {
		t.Run(fmt.Sprintf("LockSnapshot=%v", lock), func(t *testing.T) {
			_, js := natstest.Start(t).Connect(t)
			publish(t, js, snapshot.ObjectName(10), file(t, 10, 50))
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(5)), file(t, 5, 50), 0o644); err != nil {
				t.Fatal(err)
			}
			layers, feed := newLayers(), newFeed()
			s := New(js, layers, feed, Config{Dir: dir, LockSnapshot: lock})
			ctx := context.Background()
			if err := s.Boot(ctx); err != nil {
				t.Fatal(err)
			}
			boot := layers.Snapshots.Current()
			if boot.Snap.Header.ChangeVersion != 10 || !boot.Snap.Mapped() || boot.Snap.Locked() {
				t.Fatalf("after Boot: version %d mapped %v locked %v; want the download, mapped, not locked yet",
					boot.Snap.Header.ChangeVersion, boot.Snap.Mapped(), boot.Snap.Locked())
			}
			if err := s.VerifyInService(ctx); err != nil {
				t.Fatal(err)
			}
			if boot.Snap.Locked() != lock {
				t.Fatalf("after VerifyInService: locked %v, want %v", boot.Snap.Locked(), lock)
			}
			publish(t, js, snapshot.ObjectName(20), file(t, 20, 50))
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			next := layers.Snapshots.Current()
			if next.Snap.Header.ChangeVersion != 20 || next.Snap.Locked() != lock || boot.Snap.Locked() {
				t.Fatalf("after the swap: version %d locked %v, replaced one locked %v; want 20, %v, false",
					next.Snap.Header.ChangeVersion, next.Snap.Locked(), boot.Snap.Locked(), lock)
			}
		})
	}
	// A local copy opened in place is locked after its verification.
	_, js := natstest.Start(t).Connect(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), file(t, 10, 50), 0o644); err != nil {
		t.Fatal(err)
	}
	layers := newLayers()
	s := New(js, layers, newFeed(), Config{Dir: dir, LockSnapshot: true})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	cur := layers.Snapshots.Current()
	if cur.Snap.Verified() || cur.Snap.Locked() {
		t.Fatalf("local copy at boot: verified %v locked %v, want neither", cur.Snap.Verified(), cur.Snap.Locked())
	}
	if err := s.VerifyInService(context.Background()); err != nil || !cur.Snap.Locked() {
		t.Fatalf("local copy after VerifyInService: %v, locked %v; want it locked", err, cur.Snap.Locked())
	}
}

// domainFile is a snapshot at version v with the domain table domains and
// one link, code 00000A, on each domain, targeting a URL naming the domain
// and v.
func domainFile(t *testing.T, v uint64, domains []link.Domain) []byte {
	t.Helper()
	var w snapshot.Writer
	blooms := map[link.DomainID][]byte{}
	for _, d := range domains {
		if err := w.Add(snapshot.Link{Domain: d.ID, Code: "00000A", URL: fmt.Sprintf("https://d%d.example/?v=%d", d.ID, v),
			RedirectType: 302, Status: link.Active, Version: v}); err != nil {
			t.Fatal(err)
		}
		f := bloom.NewWithEstimates(1000, 0.01)
		f.AddString("00000A")
		var b bytes.Buffer
		if _, err := f.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		blooms[d.ID] = b.Bytes()
	}
	var out bytes.Buffer
	if err := w.Write(&out, snapshot.Header{ChangeVersion: v, StreamSeq: v + 100}, nil, domains,
		func(d link.DomainID) ([]byte, uint64) { return blooms[d], 1 }); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSnapshotDomainTable: the domain table of each snapshot put in
// service reaches the layers' Domains, before its links serve, without
// undoing a newer domain change the stream applied meanwhile.
func TestSnapshotDomainTable(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	conf := func(id link.DomainID, host string, v uint64) link.Domain {
		mode := link.CodesFF1
		var keys []string
		if id == link.DefaultDomain {
			mode = link.CodesSequential
		} else {
			keys = []string{"k1"}
		}
		return link.Domain{ID: id, Host: host, CodeMode: mode, KeyIDs: keys, Status: link.DomainActive, Version: v}
	}
	publish(t, js, snapshot.ObjectName(10), domainFile(t, 10, []link.Domain{conf(0, "edge.test", 1), conf(1, "one.test", 2)}))
	layers := newLayers()
	layers.Domains = store.NewDomains(nil)
	s := New(js, layers, newFeed(), Config{})
	if err := s.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	resolves := func(host string) (link.DomainID, bool) {
		d, ok := layers.Domains.ByHost([]byte(host))
		if !ok {
			return 0, false
		}
		return d.Conf.ID, true
	}
	if id, ok := resolves("one.test"); !ok || id != 1 || !layers.Domains.Known() {
		t.Fatalf("after boot: one.test → %d, %v (known %v); want domain 1", id, ok, layers.Domains.Known())
	}
	if e, ok := layers.Snapshots.Lookup(1, []byte("00000A")); !ok || string(e.AppendURL(nil)) != "https://d1.example/?v=10" {
		t.Fatalf("domain 1's 00000A: %v", ok)
	}
	// The stream moves domain 1 (version 30) before a snapshot at 20
	// arrives that still has it on one.test and adds domain 2.
	if err := layers.ApplyDomain(conf(1, "uno.test", 30)); err != nil {
		t.Fatal(err)
	}
	publish(t, js, snapshot.ObjectName(20), domainFile(t, 20, []link.Domain{conf(0, "edge.test", 1), conf(1, "one.test", 2), conf(2, "two.test", 15)}))
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cur := layers.Snapshots.Current(); cur == nil || cur.Snap.Header.ChangeVersion != 20 {
		t.Fatal("the snapshot at 20 is not in service")
	}
	for host, want := range map[string]link.DomainID{"edge.test": 0, "uno.test": 1, "two.test": 2} {
		if id, ok := resolves(host); !ok || id != want {
			t.Errorf("after the sync: %s → %d, %v; want %d", host, id, ok, want)
		}
	}
	if _, ok := resolves("one.test"); ok {
		t.Error("the snapshot's older host of domain 1 came back")
	}
}
