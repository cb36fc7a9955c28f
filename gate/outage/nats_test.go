package outage

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestNATSOutageUnderLoad: NATS is stopped and restarted while clients
// follow known links and create new ones. Known links never fail on the
// edge, control keeps answering 201 (the outbox holds the changes), a
// second edge restarted during the outage boots from its disk snapshot and
// serves every link in it, and once NATS is back both edges apply every
// committed change and every 201 redirects.
func TestNATSOutageUnderLoad(t *testing.T) { natsOutage(t, 1, 30) }

// TestNATSOutagesUnderLoad is the same with three longer outages.
func TestNATSOutagesUnderLoad(t *testing.T) {
	gate(t)
	natsOutage(t, 3, 600)
}

var publishedLine = regexp.MustCompile(`published as (\S+)`)

func natsOutage(t *testing.T, outages, createsPerOutage int) {
	s := newStack(t, 2)
	a := startEdge(t, s.nats.URL(), t.TempDir())
	bDir := t.TempDir()
	b := startEdge(t, s.nats.URL(), bDir)
	c := s.startControl(t, a.URL)

	// Known links: created, then put in a snapshot that edge b keeps on disk.
	led := stack.NewLedger()
	const known = 100
	for i := range known {
		r := createPatiently(c.URL, s.keys[i%2], fmt.Sprintf("https://example.com/known/%d", i), "")
		if r.Status != http.StatusCreated {
			t.Fatalf("create known link %d: %d %v %v", i, r.Status, r.Problem, r.Err)
		}
		led.Add(r.Code, r.URL, "before")
	}
	knownCodes := led.Codes()
	waitApplied(t, a, s.pg.Pool(), time.Minute)
	out, err := s.runControlCommand(t, "snapshot", "build", "--publish", "--nats-url", s.nats.URL())
	m := publishedLine.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("control snapshot build --publish: %v\n%s", err, out)
	}
	snapVersion, _ := snapshot.ParseObjectName(m[1])
	// Control's own schedule may publish a newer one meanwhile: any at or
	// after this one holds every known link.
	stack.Eventually(t, "edge b keeps the snapshot (or a newer one) on disk", time.Minute, func() bool {
		cur := b.E.Snapshots.Current()
		if cur == nil || cur.Snap.Header.ChangeVersion < snapVersion {
			return false
		}
		_, err := os.Stat(filepath.Join(bDir, snapshot.ObjectName(cur.Snap.Header.ChangeVersion)))
		return err == nil
	})

	// Load on edge a: readers follow known links without pause; creators
	// create, each 201 followed at once.
	var (
		firstBad              atomic.Pointer[string]
		createdDuring, notYet atomic.Int64
		stop                  = make(chan struct{})
		wg                    sync.WaitGroup
	)
	note := func(p *atomic.Pointer[string], format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		p.CompareAndSwap(nil, &msg)
	}
	rd := startReaders(t, 3, 8, a.URL, led, knownCodes, "NATS")
	natsDown := &rd.Fault
	for w, key := range s.keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				down := natsDown.Load()
				r := createLink(c.URL, key, fmt.Sprintf("https://example.com/load/%d/%d", w, i), "")
				switch {
				case r.Err == nil && r.Status == http.StatusTooManyRequests:
					time.Sleep(50 * time.Millisecond)
				case r.Err == nil && r.Status == http.StatusCreated:
					by := "nats up"
					if down && natsDown.Load() {
						by = "nats down"
						createdDuring.Add(1)
					}
					led.Add(r.Code, r.URL, by)
					// With NATS down the edge can neither receive the link
					// nor ask the authority: 503, never a false 404.
					switch status, loc, err := stack.Follow(a.URL, r.Code); {
					case err == nil && status == http.StatusFound && loc == r.URL:
					case err == nil && status == http.StatusServiceUnavailable:
						notYet.Add(1)
					default:
						note(&firstBad, "GET /%s right after its 201 (NATS down: %v): %d %q %v", r.Code, down, status, loc, err)
					}
				default:
					note(&firstBad, "create (NATS down: %v): %d %v %v", down, r.Status, r.Problem, r.Err)
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait(); rd.Stop() })
	t.Cleanup(stopLoad)

	var bootNotes []string
	for o := range outages {
		before := createdDuring.Load()
		s.nats.Stop()
		natsDown.Store(true)
		stack.Eventually(t, fmt.Sprintf("%d creates answered 201 with NATS down", createsPerOutage), 3*time.Minute, func() bool {
			return createdDuring.Load()-before >= int64(createsPerOutage)
		})
		if o == 0 {
			// Edge b restarts with NATS still down: it boots from its disk
			// copy and serves every link the snapshot holds; links it
			// cannot know yet are 503, never 404.
			diskVersion := b.E.Snapshots.Current().Snap.Header.ChangeVersion
			if err := b.Stop(); err != nil {
				t.Errorf("stop edge b: %v", err)
			}
			b = startEdge(t, s.nats.URL(), bDir)
			stack.Eventually(t, "edge b boots from its disk snapshot with NATS down", time.Minute, b.E.Syncer.Booted)
			if cur := b.E.Snapshots.Current(); cur == nil || cur.Snap.Header.ChangeVersion != diskVersion {
				t.Fatalf("restarted edge b serves snapshot %+v; want its disk copy at version %d", cur, diskVersion)
			}
			led.CheckRedirects(t, b.URL, knownCodes)
			var newer []string
			for _, code := range led.Codes() {
				// Created with NATS down: no snapshot can hold them.
				if led.Get(code).By == "nats down" && len(newer) < 20 {
					newer = append(newer, code)
				}
			}
			for _, code := range newer {
				if status, _, err := stack.Follow(b.URL, code); err != nil || status != http.StatusServiceUnavailable {
					t.Fatalf("restarted edge b, NATS down, link it cannot know (%s): %d %v; want 503", code, status, err)
				}
			}
			// It says it is degraded: unready (503) or in service but
			// "degraded:" (200), whichever the edge's readiness policy is.
			status, body := readyz(b.URL)
			if status != http.StatusServiceUnavailable && !strings.HasPrefix(body, "degraded:") {
				t.Fatalf("restarted edge b without NATS reports plain ready: %d %q", status, body)
			}
			bootNotes = append(bootNotes, fmt.Sprintf("edge b restarted with NATS down booted from its disk snapshot (change version %d): all %d known links 302, %d links created during the outage 503 (none 404), readyz %d %q",
				diskVersion, len(knownCodes), len(newer), status, strings.TrimSpace(body)))
		}
		s.nats.Restart(t)
		natsDown.Store(false)
		// Both edges catch up with everything committed meanwhile.
		waitApplied(t, a, s.pg.Pool(), 2*time.Minute)
		waitApplied(t, b, s.pg.Pool(), 2*time.Minute)
	}
	stopLoad()
	if msg := firstBad.Load(); msg != nil {
		t.Fatalf("first wrong answer: %s", *msg)
	}
	rd.check(t)
	led.CheckUnique(t)
	led.CheckInDatabase(t, s.pg.Pool())
	va := waitApplied(t, a, s.pg.Pool(), 2*time.Minute)
	vb := waitApplied(t, b, s.pg.Pool(), 2*time.Minute)
	all := led.Codes()
	led.CheckRedirects(t, a.URL, all)
	led.CheckRedirects(t, b.URL, all)
	for _, code := range all {
		if !a.knows(code) && led.Get(code).By != "before" {
			t.Fatalf("link %s created under load never reached edge a through the stream", code)
		}
	}

	evidence.Record(t, evidence.ContractUnderLag,
		"%d NATS outage(s) under load: %d reads of known links on the edge (%d while NATS was down), %d failed; %d creates answered 201 with NATS down, followed at once: %d answered 503 (never 404) until NATS came back; %s",
		outages, rd.reads.Load(), rd.during.Load(), rd.failures.Load(), createdDuring.Load(), notYet.Load(), strings.Join(bootNotes, "; "))
	evidence.Record(t, evidence.Jumpable,
		"after NATS came back both edges applied the outbox's newest version (%d, %d) and all %d 201s (%d created during outages) 302 with their targets on both",
		va, vb, len(all), createdDuring.Load())
}

// readyz asks an edge's readiness probe.
func readyz(edgeURL string) (int, string) {
	status, body, err := stack.Get(edgeURL + "/-/readyz")
	if err != nil {
		return 0, err.Error()
	}
	return status, body
}
