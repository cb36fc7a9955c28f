package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// found is what Find answered, reduced to comparable facts; url is empty
// when nothing was found.
func found(t *testing.T, a *Layers, code string) (url string, version uint64, fromSnap bool) {
	t.Helper()
	h, ok := a.Find(link.DefaultDomain, []byte(code))
	if !ok {
		return "", 0, false
	}
	if h.Overlay {
		return h.Rec.URL(), h.Rec.Version, false
	}
	return string(h.Snap.AppendURL(nil)), h.Snap.Version, true
}

func TestFindLayers(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots)}
	// Applied before the snapshot arrives and newer than it: the install
	// must mark it, or the file's older entry would answer.
	a.Apply(&Entry{Code: "00000B", URL: "https://b/overlay-12", Status: link.Active, RedirectType: 302, Version: 12})
	a.Install(loadTB(t, []snapshot.Link{
		{Code: "00000A", URL: "https://a/snap", RedirectType: 302, Status: link.Active},
		{Code: "00000B", URL: "https://b/snap", RedirectType: 302, Status: link.Active},
		{Code: "00000C", URL: "https://c/snap", RedirectType: 302, Status: link.Active},
		{Code: "00000F", URL: "https://f/snap-14", RedirectType: 302, Status: link.Active, Version: 14},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10}, nil))
	a.Apply(&Entry{Code: "00000C", URL: "https://c/overlay-13", Status: link.Active, RedirectType: 302, Version: 13})
	a.Apply(&Entry{Code: "00000F", URL: "https://f/overlay-11", Status: link.Active, RedirectType: 302, Version: 11})
	a.Apply(&Entry{Code: "00000G", URL: "https://g/overlay-15", Status: link.Active, RedirectType: 302, Version: 15})
	for _, tt := range []struct {
		code     string
		url      string
		fromSnap bool
	}{
		{"00000A", "https://a/snap", true},        // unchanged since the snapshot
		{"00000B", "https://b/overlay-12", false}, // applied before the install, newer
		{"00000C", "https://c/overlay-13", false}, // applied after the install
		{"00000F", "https://f/snap-14", true},     // the overlay's is older than the file's own
		{"00000G", "https://g/overlay-15", false}, // only in the overlay
	} {
		url, _, fromSnap := found(t, a, tt.code)
		if url != tt.url || fromSnap != tt.fromSnap {
			t.Errorf("Find(%s) = %q (snapshot %v); want %q (snapshot %v)", tt.code, url, fromSnap, tt.url, tt.fromSnap)
		}
	}
	if _, ok := a.Find(link.DefaultDomain, []byte("00000Z")); ok {
		t.Error("Find found a code no layer holds")
	}
	l := a.Snapshots.Current()
	for code, want := range map[string]bool{"00000A": false, "00000B": true, "00000C": true} {
		i, _ := l.Snap.Find(link.DefaultDomain, []byte(code))
		if l.isOverridden(i) != want {
			t.Errorf("%s overridden = %v; want %v", code, !want, want)
		}
	}
	for _, code := range []string{"00000A", "00000C", "00000G", "00000Z"} {
		c := []byte(code)
		if n := testing.AllocsPerRun(100, func() { a.Find(link.DefaultDomain, c) }); n != 0 {
			t.Errorf("Find(%s) allocated %v times", code, n)
		}
	}
}

// A newer snapshot replaces the one in service while links keep changing:
// the entries that stay in the overlay are marked in the new file before
// it serves, the ones it supersedes are pruned, and no answer goes back to
// a version older than one already seen.
func TestFindAcrossInstalls(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Snapshots: new(Snapshots)}
	snap := func(cv uint64, urls map[string]string) *Loaded {
		var ls []snapshot.Link
		for code, u := range urls {
			ls = append(ls, snapshot.Link{Code: code, URL: u, RedirectType: 302, Status: link.Active})
		}
		return loadTB(t, ls, snapshot.Header{ChangeVersion: cv, StreamSeq: cv}, nil)
	}
	a.Install(snap(10, map[string]string{"00000A": "https://a/10", "00000B": "https://b/10"}))
	a.Apply(&Entry{Code: "00000A", URL: "https://a/20", Status: link.Active, RedirectType: 302, Version: 20})
	a.Apply(&Entry{Code: "00000B", URL: "https://b/30", Status: link.Active, RedirectType: 302, Version: 30})
	// Built at 25: holds A's change at 20, not B's at 30.
	a.Install(snap(25, map[string]string{"00000A": "https://a/20", "00000B": "https://b/10"}))
	if _, ok := a.Overlay.Lookup(link.DefaultDomain, []byte("00000A")); ok {
		t.Error("the overlay kept A's change the new snapshot holds")
	}
	for code, want := range map[string]string{"00000A": "https://a/20", "00000B": "https://b/30"} {
		if url, _, _ := found(t, a, code); url != want {
			t.Errorf("after the second install Find(%s) = %q; want %q", code, url, want)
		}
	}
}

// A lookup that read the old snapshot pointer just before an install and
// probes the overlay just after the prune must not answer from the old
// file (or answer "not found"): it looks again.
func TestFindLooksAgainAfterAPrune(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Snapshots: new(Snapshots)}
	a.Install(loadTB(t, []snapshot.Link{{Code: "00000A", URL: "https://a/10", RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 10, StreamSeq: 10}, nil))
	old := a.Snapshots.Current()
	a.Apply(&Entry{Code: "00000A", URL: "https://a/20", Status: link.Active, RedirectType: 302, Version: 20})
	a.Apply(&Entry{Code: "00000N", URL: "https://n/21", Status: link.Active, RedirectType: 302, Version: 21})
	a.Install(loadTB(t, []snapshot.Link{
		{Code: "00000A", URL: "https://a/20", RedirectType: 302, Status: link.Active},
		{Code: "00000N", URL: "https://n/21", RedirectType: 302, Status: link.Active},
	}, snapshot.Header{ChangeVersion: 21, StreamSeq: 21}, nil))
	for _, code := range []string{"00000A", "00000N"} {
		if _, _, stale := a.findIn(old, link.DefaultDomain, []byte(code)); !stale {
			t.Errorf("findIn(replaced snapshot, %s) after the prune did not report stale", code)
		}
	}
	for code, want := range map[string]string{"00000A": "https://a/20", "00000N": "https://n/21"} {
		if url, _, _ := found(t, a, code); url != want {
			t.Errorf("Find(%s) = %q; want %q", code, url, want)
		}
	}
}

// Readers race an applier and an installer. Every code's version only
// grows on the stream; a reader must never see a code's version go down,
// and once Apply returned, every later Find sees that version or newer.
func TestFindConcurrentWithApplyAndInstall(t *testing.T) {
	const codes = 64
	a := &Layers{Overlay: NewOverlay(), Snapshots: new(Snapshots)}
	name := func(i int) string {
		c, err := base62.Encode(uint64(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// latest[i] is the newest version of code i whose Apply returned.
	var latest [codes]atomic.Uint64
	var mu sync.Mutex // the applier's state, read by the installer
	state := map[string]uint64{}
	build := func() *Loaded {
		mu.Lock()
		defer mu.Unlock()
		var ls []snapshot.Link
		cv := uint64(0)
		for code, v := range state {
			cv = max(cv, v)
			ls = append(ls, snapshot.Link{Code: code, URL: fmt.Sprintf("https://x/%d", v), RedirectType: 302, Status: link.Active})
		}
		return loadTB(t, ls, snapshot.Header{ChangeVersion: cv, StreamSeq: cv}, nil)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // applier: one global version sequence, like the stream
		v := uint64(0)
		for n := 0; n < 20_000; n++ {
			i := n % codes
			v++
			mu.Lock()
			a.Apply(&Entry{Code: name(i), URL: fmt.Sprintf("https://x/%d", v), Status: link.Active, RedirectType: 302, Version: v})
			state[name(i)] = v
			mu.Unlock()
			latest[i].Store(v)
		}
		close(stop)
	})
	wg.Go(func() { // installer
		for {
			select {
			case <-stop:
				return
			default:
			}
			a.Install(build())
		}
	})
	for range 2 {
		wg.Go(func() {
			var seen [codes]uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range codes {
					floor := latest[i].Load()
					url, _, _ := found(t, a, name(i))
					if floor == 0 {
						continue
					}
					var v uint64
					if url == "" {
						t.Errorf("code %d lost (applied at %d)", i, floor)
						return
					}
					if _, err := fmt.Sscanf(url, "https://x/%d", &v); err != nil {
						t.Errorf("code %d: URL %q", i, url)
						return
					}
					if v < floor || v < seen[i] {
						t.Errorf("code %d answered version %d after %d was applied and %d seen", i, v, floor, seen[i])
						return
					}
					seen[i] = v
				}
			}
		})
	}
	wg.Wait()
}
