package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

func TestLastWriterWinsByVersion(t *testing.T) {
	s := New()
	s.Apply(&Entry{Code: "00000A", URL: "https://v2", Status: link.Active, Version: 2})
	if s.Apply(&Entry{Code: "00000A", URL: "https://v1", Status: link.Active, Version: 1}) {
		t.Fatal("an older version replaced a newer one")
	}
	if s.Apply(&Entry{Code: "00000A", URL: "https://v2-dup", Status: link.Active, Version: 2}) {
		t.Fatal("a duplicate version was applied twice")
	}
	s.Apply(&Entry{Code: "00000A", Status: link.Deleted, Version: 3})
	e, ok := s.Lookup([]byte("00000A"))
	if !ok || e.Version != 3 || e.Status != link.Deleted {
		t.Fatalf("Lookup = %+v, %v; want version 3 deleted", e, ok)
	}
	if _, ok := s.Lookup([]byte("00000a")); ok {
		t.Fatal("codes differing only in case must be distinct")
	}
}

func TestConcurrentApplyAndLookup(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 500 {
				s.Apply(&Entry{Code: fmt.Sprintf("c%05d", v%50), Status: link.Active, URL: "https://x", Version: uint64(v*4 + w + 1)})
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range 2000 {
				s.Lookup([]byte(fmt.Sprintf("c%05d", v%50)))
			}
		}()
	}
	wg.Wait()
	for i := range 50 {
		e, ok := s.Lookup([]byte(fmt.Sprintf("c%05d", i)))
		if !ok {
			t.Fatalf("code %d missing", i)
		}
		// The highest version written for code i: v = 450+i by writer 3.
		if want := uint64((450+i)*4 + 3 + 1); e.Version != want {
			t.Fatalf("code %d kept version %d, want %d: an older write won", i, e.Version, want)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	s := New()
	s.Apply(&Entry{Code: "00000A", URL: "https://x", Status: link.Active, Version: 1})
	code := []byte("00000A")
	if n := testing.AllocsPerRun(100, func() { s.Lookup(code) }); n != 0 {
		t.Fatalf("Lookup allocated %v times", n)
	}
}
