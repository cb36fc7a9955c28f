package kvwitness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/natstest"
)

// Many instances advancing one namespace concurrently leave the highest end
// they recorded, never a lower one, and a lower advance changes nothing.
func TestAdvanceOnlyRaises(t *testing.T) {
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ws []*Witness
	for range 4 {
		_, js := ns.Connect(t)
		ws = append(ws, New(js, "", 1)) // four clients race to create the bucket
	}
	if hw, err := ws[0].HighWater(ctx, "default"); err != nil || hw != 0 {
		t.Fatalf("HighWater of a new namespace = %d, %v; want 0", hw, err)
	}
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for k := range 25 {
				end := uint64(1000 + 4*k + i)
				if err := w.Advance(ctx, "default", end); err != nil {
					t.Errorf("Advance(%d): %v", end, err)
					return
				}
				if hw, err := w.HighWater(ctx, "default"); err != nil || hw < end {
					t.Errorf("HighWater after Advance(%d) = %d, %v", end, hw, err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := uint64(1000 + 4*24 + 3)
	if err := ws[1].Advance(ctx, "default", 5); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default", "other"} {
		hw, err := ws[2].HighWater(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "default" && hw != want || name == "other" && hw != 0 {
			t.Errorf("HighWater(%s) = %d; want %d for default, 0 for other", name, hw, want)
		}
	}

	// Unreachable NATS is an error, not a zero high-water.
	ns.Stop()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if hw, err := ws[0].HighWater(sctx, "default"); err == nil {
		t.Errorf("HighWater with NATS down = %d, nil; want an error", hw)
	}
}
