package visitorsalt

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
)

var day = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }

// salts reads the bucket: every day's salt by key.
func salts(t *testing.T, js jetstream.JetStream) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	l, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range l.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		out[k] = e.Value()
	}
	return out
}

func round(t *testing.T, k *Keeper) {
	t.Helper()
	if err := k.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWritesTodayAndTomorrowOnce: a round writes random 256-bit salts for
// today and tomorrow (UTC); later rounds, and a second control's, never
// change them.
func TestWritesTodayAndTomorrowOnce(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	clk := newClock(day.Add(23*time.Hour + 30*time.Minute))
	a := New(js, Config{Now: clk.now})
	b := New(js, Config{Now: clk.now})
	var wg sync.WaitGroup
	for _, k := range []*Keeper{a, b, a, b} {
		wg.Go(func() {
			if err := k.Round(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := salts(t, js)
	today, tomorrow := got[clicks.SaltKey(day)], got[clicks.SaltKey(day.Add(24*time.Hour))]
	if len(got) != 2 || len(today) != clicks.SaltLen || len(tomorrow) != clicks.SaltLen || bytes.Equal(today, tomorrow) {
		t.Fatalf("bucket holds %d salts (today %x, tomorrow %x); want 2 distinct of %d bytes", len(got), today, tomorrow, clicks.SaltLen)
	}
	if bytes.Equal(today, make([]byte, clicks.SaltLen)) {
		t.Fatal("today's salt is zeros")
	}
	if c := a.Created.Load() + b.Created.Load(); c != 2 {
		t.Fatalf("%d salts created by two keepers over four rounds; want 2", c)
	}
	// Much later rounds on the same day keep the same salts.
	clk.set(day.Add(23*time.Hour + 59*time.Minute))
	round(t, b)
	again := salts(t, js)
	if !bytes.Equal(again[clicks.SaltKey(day)], today) || !bytes.Equal(again[clicks.SaltKey(day.Add(24*time.Hour))], tomorrow) {
		t.Fatal("a later round changed a day's salt")
	}
}

// TestRotatesAtMidnightAndErases: crossing midnight a round writes the new
// tomorrow's salt and keeps yesterday's through its grace; once the grace
// has passed the salt is deleted, its stored message overwritten (the
// bytes are in no message of the stream, nor anywhere in the server's
// store on disk), and it is never written again, even by a control whose
// clock is a day behind.
func TestRotatesAtMidnightAndErases(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	clk := newClock(day.Add(23*time.Hour + 59*time.Minute + 59*time.Second))
	k := New(js, Config{Now: clk.now})
	round(t, k)
	first := salts(t, js)[clicks.SaltKey(day)]

	clk.set(day.Add(24*time.Hour + time.Second))
	round(t, k)
	got := salts(t, js)
	if len(got) != 3 || got[clicks.SaltKey(day.Add(48*time.Hour))] == nil || !bytes.Equal(got[clicks.SaltKey(day)], first) {
		t.Fatalf("after midnight: %d salts; want yesterday's (unchanged), today's and tomorrow's", len(got))
	}

	clk.set(day.Add(24*time.Hour + clicks.SaltGrace - time.Second))
	round(t, k)
	if _, ok := salts(t, js)[clicks.SaltKey(day)]; !ok {
		t.Fatal("deleted before its grace ended")
	}
	clk.set(day.Add(24*time.Hour + clicks.SaltGrace))
	round(t, k)
	if _, ok := salts(t, js)[clicks.SaltKey(day)]; ok || k.Deleted.Load() != 1 {
		t.Fatalf("still held once its grace ended (deleted %d)", k.Deleted.Load())
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, clicks.SaltKey(day)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get the deleted salt: %v; want not found", err)
	}
	stream, err := js.Stream(ctx, "KV_"+clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(m.Data, first) {
			t.Fatalf("message %d still holds the deleted salt", seq)
		}
	}

	// A control a day behind would write "today" where a salt was
	// deleted: the purge marker makes the write fail.
	late := New(js, Config{Now: newClock(day.Add(time.Hour)).now})
	round(t, late)
	if _, ok := salts(t, js)[clicks.SaltKey(day)]; ok || late.Created.Load() != 0 {
		t.Fatal("a deleted day's salt was written again")
	}

	// Nowhere on disk either: the server's whole store, flushed by a stop.
	dir := ns.StoreDir()
	ns.Stop()
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, first) {
			t.Errorf("the deleted salt is still on disk in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRetriesWhileNATSIsDown: rounds that fail are counted and
// retried; once NATS is back the salts are written.
func TestRunRetriesWhileNATSIsDown(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	ns.Stop()
	poll.Until(t, "the client disconnected", 10*time.Second, func() bool { return !nc.IsConnected() })
	k := New(js, Config{Now: newClock(day).now, Every: 20 * time.Millisecond, Timeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	poll.Until(t, "a failed round", 20*time.Second, func() bool { return k.Failures.Load() > 0 })
	ns.Restart(t)
	poll.Until(t, "both salts written", 30*time.Second, func() bool { return k.Created.Load() == 2 })
}

// TestLeavesOtherKeys: a key that names no day is not the keeper's: left.
func TestLeavesOtherKeys(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	k := New(js, Config{Now: newClock(day).now})
	round(t, k)
	kv, err := js.KeyValue(context.Background(), clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "operator-note", []byte("x")); err != nil {
		t.Fatal(err)
	}
	k.cfg.Now = newClock(day.Add(30 * 24 * time.Hour)).now
	round(t, k)
	got := salts(t, js)
	if _, ok := got["operator-note"]; !ok || len(got) != 3 {
		t.Fatalf("after a month: %d keys (%v); want the note and the month's two salts", len(got), got)
	}
}
