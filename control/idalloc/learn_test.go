package idalloc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/idalloctest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Namespaces made after the allocator started (a domain created at run
// time, by this instance or another) are learned on first use and served
// with every rule of a configured one; exhaustion stays per namespace.
func TestLearnsNamespacesAtRunTime(t *testing.T) {
	pool := pgtest.Pool(t)
	store := allocstore.New(pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := newRecorder()
	cfg := fastConfig(t, rec, idalloc.Namespace{Name: "default", Start: 1, End: 1000, Step: 50})
	cfg.Lookup = store.LookupNamespace
	a := idalloctest.Start(t, store, cfg)
	if err := a.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}

	// Made after the allocator started, as creating a domain does.
	lo3, hi3 := link.IDRange(3)
	d3 := idalloc.Namespace{Name: link.NamespaceOf(3), Start: lo3, End: hi3, Step: 7}
	_, hi4 := link.IDRange(4)
	d4 := idalloc.Namespace{Name: link.NamespaceOf(4), Start: hi4 - 5, End: hi4, Step: 2} // five IDs left
	for _, ns := range []idalloc.Namespace{d3, d4} {
		if err := store.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}

	// Many goroutines ask for the new namespace at once: it is learned
	// once, and no ID is handed out twice.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				id, err := a.Next(ctx, d3.Name)
				if err != nil {
					errs <- err
					return
				}
				rec.id(id)
				a.Done(id, true)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Next(%s): %v", d3.Name, err)
	}
	var got4 []uint64
	for {
		id, err := a.Next(ctx, d4.Name)
		if errors.Is(err, idalloc.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatalf("Next(%s) after %v: %v", d4.Name, got4, err)
		}
		got4 = append(got4, id)
		a.Done(id, true)
	}
	if len(got4) != 5 || got4[4] != hi4-1 {
		t.Errorf("%s handed out %v, want the last five IDs of domain 4 ending at %d", d4.Name, got4, hi4-1)
	}
	if d, local := link.SplitID(got4[4]); d != 4 || local != base62.MaxID {
		t.Errorf("last ID of domain 4 splits to (%d, %d), want (4, %d)", d, local, base62.MaxID)
	}
	// One namespace exhausted leaves the others serving.
	for _, ns := range []string{"default", d3.Name} {
		id, err := a.Next(ctx, ns)
		if err != nil {
			t.Fatalf("Next(%s) after %s ran out: %v", ns, d4.Name, err)
		}
		a.Done(id, true)
	}
	rec.mu.Lock()
	for id := range rec.ids {
		if id < lo3 || id >= hi3 {
			t.Errorf("ID %d of %s outside [%d, %d)", id, d3.Name, lo3, hi3)
		}
	}
	n3 := len(rec.ids)
	rec.mu.Unlock()
	if n3 != 8*40 {
		t.Errorf("%d distinct IDs of %s, want %d", n3, d3.Name, 8*40)
	}
	// Segments of the learned namespace are sealed like any: Done reached
	// them.
	s, err := a.Stats(d3.Name)
	if err != nil {
		t.Fatal(err)
	}
	if s.StrayDone != 0 {
		t.Errorf("%d stray Done calls, want 0", s.StrayDone)
	}
	if _, err := a.Next(ctx, "d99"); !errors.Is(err, idalloc.ErrUnknownNamespace) {
		t.Errorf("Next(d99), which the authority lacks: %v, want ErrUnknownNamespace", err)
	}
}

// A namespace's range must lie in one domain's IDs.
func TestNamespaceWithinOneDomain(t *testing.T) {
	store := allocstore.New(pgtest.Pool(t))
	ctx := context.Background()
	lo1, hi1 := link.IDRange(1)
	for name, ns := range map[string]idalloc.Namespace{
		"across domains 0 and 1": {Name: "x", Start: base62.Space - 10, End: base62.Space + 10},
		"domain 1's sentinel":    {Name: "x", Start: lo1 - 1, End: lo1 + 10},
		"past domain 1":          {Name: "x", Start: lo1, End: hi1 + 1},
		"past the last domain":   {Name: "x", Start: link.IDBase(link.MaxDomainID+1) + 1, End: link.IDBase(link.MaxDomainID+1) + 10},
	} {
		if _, err := idalloc.New(ctx, store, idalloc.Config{Namespaces: []idalloc.Namespace{ns}}); !errors.Is(err, idalloc.ErrConfig) {
			t.Errorf("%s: New([%d, %d)) = %v, want ErrConfig", name, ns.Start, ns.End, err)
		}
	}
	a := idalloctest.Start(t, store, fastConfig(t, nil, idalloc.Namespace{Name: "d1", Start: lo1, End: hi1}))
	id, err := a.Next(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	a.Done(id, true)
	if id != lo1 {
		t.Errorf("first ID of domain 1 = %d, want %d", id, lo1)
	}
}
