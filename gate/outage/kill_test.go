package outage

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// TestPodHardKill is the fault matrix's pod-hard-kill row, end to end:
// control (the real binary) takes creates from four clients at once with
// tiny segments, is SIGKILLed mid-create once it has taken at least two
// segments, and a new control process on the same database and NATS
// takes over while the clients keep creating.
func TestPodHardKill(t *testing.T) { podHardKill(t, 1, 120) }

// TestPodHardKillRepeated kills four control processes in a row under a
// longer load.
func TestPodHardKillRepeated(t *testing.T) {
	gate(t)
	podHardKill(t, 4, 1000)
}

// killPhase is one control process's life in the scenario.
type killPhase struct {
	c          *control
	killed     bool
	inFlight   int64      // creates sent and not answered when it was killed
	intervals  []interval // its audited intervals after it ended
	answered   int        // 201s it gave
	unpubAtEnd int64      // outbox rows not yet published when it was killed
}

func podHardKill(t *testing.T, kills, perPhase int) {
	const step = "20"
	s := newStack(t, 4)
	e := startEdge(t, s.nats.URL(), t.TempDir())
	ctx := context.Background()

	var cur atomic.Pointer[control]
	phases := []*killPhase{{c: s.startControl(t, e.URL, "--id-step", step)}}
	cur.Store(phases[0].c)

	led := stack.NewLedger()
	var (
		byPid                     sync.Map // pid -> *atomic.Int64 of 201s
		noAnswer, notYet, refused atomic.Int64
		inFlight                  atomic.Int64
		firstBad                  atomic.Pointer[string]
		stop                      = make(chan struct{})
		wg                        sync.WaitGroup
	)
	count := func(pid int) *atomic.Int64 {
		v, _ := byPid.LoadOrStore(pid, new(atomic.Int64))
		return v.(*atomic.Int64)
	}
	bad := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		firstBad.CompareAndSwap(nil, &msg)
	}
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
				c := cur.Load()
				target := fmt.Sprintf("https://example.com/kill/%d/%d", w, i)
				inFlight.Add(1)
				r := createLink(c.URL, key, target, "")
				inFlight.Add(-1)
				switch {
				case r.Err != nil:
					// The process died under this create (or before it):
					// its outcome is unknown and the test never counts on it.
					noAnswer.Add(1)
					time.Sleep(20 * time.Millisecond)
				case r.Status == http.StatusTooManyRequests:
					time.Sleep(50 * time.Millisecond)
				case r.Status == http.StatusCreated:
					led.Add(r.Code, r.URL, fmt.Sprint(c.Pid))
					count(c.Pid).Add(1)
					// Followed at once: a redirect, or a 503 while no
					// authority answers between kill and restart; never a
					// 404 or another target.
					switch status, loc, err := stack.Follow(e.URL, r.Code); {
					case err == nil && status == http.StatusFound && loc == r.URL:
					case err == nil && status == http.StatusServiceUnavailable:
						notYet.Add(1)
					default:
						bad("GET /%s right after its 201 from pid %d: %d %q %v", r.Code, c.Pid, status, loc, err)
					}
				default:
					refused.Add(1)
					bad("create on pid %d: %d %v", c.Pid, r.Status, r.Problem)
				}
			}
		}()
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)

	for k := range kills {
		p := phases[k]
		prefix := p.c.instancePrefix()
		stack.Eventually(t, fmt.Sprintf("pid %d answers %d creates and leases a second segment", p.c.Pid, perPhase), 3*time.Minute, func() bool {
			return count(p.c.Pid).Load() >= int64(perPhase) && len(of(audit(t, s.pg.Pool()), prefix)) >= 2
		})
		stack.Eventually(t, "a create in flight", time.Minute, func() bool { return inFlight.Load() > 0 })
		p.inFlight = inFlight.Load()
		p.c.Kill() // the clients are mid-create: they never stop
		p.killed = true
		if err := s.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&p.unpubAtEnd); err != nil {
			t.Fatal(err)
		}
		next := &killPhase{c: s.startControl(t, e.URL, "--id-step", step)}
		phases = append(phases, next)
		cur.Store(next.c)
	}
	last := phases[len(phases)-1]
	stack.Eventually(t, fmt.Sprintf("the last control (pid %d) answers %d creates", last.c.Pid, perPhase), 3*time.Minute, func() bool {
		return count(last.c.Pid).Load() >= int64(perPhase)
	})
	stopLoad()
	if msg := firstBad.Load(); msg != nil {
		t.Fatalf("%d creates refused; first wrong answer: %s", refused.Load(), *msg)
	}

	// Allocation results: every 201's code decodes to an ID never handed
	// out before, inside an interval the audit confirmed for the process
	// that answered it.
	led.CheckUnique(t)
	ivs := audit(t, s.pg.Pool())
	for _, p := range phases {
		p.intervals = of(ivs, p.c.instancePrefix())
		p.answered = int(count(p.c.Pid).Load())
	}
	outside := 0
	for _, code := range led.Codes() {
		is := led.Get(code)
		var p *killPhase
		for _, q := range phases {
			if fmt.Sprint(q.c.Pid) == is.By {
				p = q
			}
		}
		if p == nil || !within(p.intervals, is.ID) {
			if outside++; outside <= 10 {
				t.Errorf("%s (ID %d) answered by pid %s lies outside that process's audited intervals", code, is.ID, is.By)
			}
		}
	}
	if outside > 0 {
		t.Fatalf("%d IDs outside their instance's confirmed intervals", outside)
	}
	// No reuse, no rollback: every process's intervals lie above every
	// interval of the processes before it, the killed ones' included.
	for i := 1; i < len(phases); i++ {
		var highest uint64
		for _, q := range phases[:i] {
			for _, iv := range q.intervals {
				highest = max(highest, iv.End)
			}
		}
		for _, iv := range phases[i].intervals {
			if iv.Start < highest {
				t.Fatalf("pid %d leased %v below the end %d of its predecessors' intervals: reuse or rollback", phases[i].c.Pid, iv, highest)
			}
		}
	}

	// Every 201 is in the database, and the outbox resumed: the edge
	// applies the newest committed change and holds every answered link
	// itself (from the stream, or a snapshot control built from it), not
	// only through the authority.
	led.CheckInDatabase(t, s.pg.Pool())
	applied := waitApplied(t, e, s.pg.Pool(), 2*time.Minute)
	missing := 0
	for _, code := range led.Codes() {
		if !e.knows(code) {
			if missing++; missing <= 5 {
				var v int64
				var published bool
				err := s.pg.Pool().QueryRow(ctx, `SELECT version, version < (SELECT next_version FROM outbox_published) FROM outbox WHERE code = $1`, code).Scan(&v, &published)
				snapV := uint64(0)
				if cur := e.E.Snapshots.Current(); cur != nil {
					snapV = cur.Snap.Header.ChangeVersion
				}
				t.Errorf("the edge does not hold %s (outbox version %d, published %v, %v; edge at %+v, snapshot %d); on the stream: %s",
					code, v, published, err, e.E.Feed.Position(), snapV, onStream(t, s, code, uint64(v)))
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d answered links never reached the edge (stream or snapshot)", missing)
	}
	led.CheckRedirects(t, e.URL, led.Codes())
	var inDB, unanswered int
	if err := s.pg.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT (code = ANY($1))) FROM links`, led.Codes()).
		Scan(&inDB, &unanswered); err != nil {
		t.Fatal(err)
	}

	// Waste: a killed process's segments stay open until a sweeper seals
	// them. The last process stops gracefully and seals its own; then the
	// sweep control runs every heartbeat (AllocStore.SealAbandoned) seals
	// the dead ones' — called here with a short silence, since the
	// binary's abandon period is 10 minutes.
	var openAtKill []string
	for _, p := range phases[:len(phases)-1] {
		open := 0
		for _, iv := range p.intervals {
			if !iv.Sealed {
				open++
			}
		}
		if open == 0 {
			t.Fatalf("killed pid %d has no open interval (%v): it cannot have been killed mid-segment", p.c.Pid, p.intervals)
		}
		openAtKill = append(openAtKill, fmt.Sprintf("pid %d: %d of %d intervals open", p.c.Pid, open, len(p.intervals)))
	}
	// The operator sees them: `control alloc status` names every killed
	// process among the holders of open segments.
	status, err := s.runControlCommand(t, "alloc", "status")
	if err != nil {
		t.Fatalf("control alloc status: %v\n%s", err, status)
	}
	var statusLines []string
	for _, p := range phases[:len(phases)-1] {
		line := lineWith(status, p.intervals[0].Instance)
		if line == "" {
			t.Fatalf("control alloc status does not name killed instance %s among open segments:\n%s", p.intervals[0].Instance, status)
		}
		statusLines = append(statusLines, line)
	}
	last.c.Stop(t)
	store := allocstore.New(s.pg.Pool())
	stack.Eventually(t, "the dead processes' segments are swept", time.Minute, func() bool {
		if _, err := store.SealAbandoned(ctx, "sweeper:gate-test", time.Second); err != nil {
			t.Fatal(err)
		}
		for _, iv := range audit(t, s.pg.Pool()) {
			if !iv.Sealed {
				return false
			}
		}
		return true
	})
	ivs = audit(t, s.pg.Pool())
	for i := 1; i < len(ivs); i++ {
		if ivs[i].Start < ivs[i-1].End {
			t.Fatalf("audited intervals overlap: %v of %s and %v of %s", ivs[i-1], ivs[i-1].Instance, ivs[i], ivs[i].Instance)
		}
	}
	var wasteKilled, lenKilled uint64
	var killedN, boundaryKills int
	var wasteNotes []string
	for _, p := range phases {
		p.intervals = of(ivs, p.c.instancePrefix())
		var length, used uint64
		for _, iv := range p.intervals {
			var links uint64
			if err := s.pg.Pool().QueryRow(ctx, `SELECT count(*) FROM links WHERE id >= $1 AND id < $2`, iv.Start, iv.End).Scan(&links); err != nil {
				t.Fatal(err)
			}
			if iv.Used != links {
				t.Fatalf("pid %d interval %v: sealed with used=%d but %d links exist in it", p.c.Pid, iv, iv.Used, links)
			}
			length, used = length+iv.End-iv.Start, used+iv.Used
		}
		if p.killed {
			lenKilled += length
			wasteKilled += length - used
			killedN++
			if length == used {
				// Killed right after its last segment filled and before it
				// leased the next: it held no remainder to account. Every
				// interval is sealed with its true use (checked above).
				boundaryKills++
				t.Logf("killed pid %d held no open remainder (killed at a segment boundary): %v", p.c.Pid, p.intervals)
			}
		}
		wasteNotes = append(wasteNotes, fmt.Sprintf("pid %d (%s): %d IDs in %d intervals, %d used, %d wasted",
			p.c.Pid, map[bool]string{true: "killed", false: "stopped"}[p.killed], length, len(p.intervals), used, length-used))
	}
	// A kill lands on a segment boundary about once in a segment's
	// length; every kill of a run landing there would mean the remainder
	// of an open segment is never accounted.
	if killedN > 0 && boundaryKills == killedN && killedN > 1 {
		t.Fatalf("none of the %d killed processes left an unused remainder accounted as waste: %v", killedN, wasteNotes)
	}
	capa, err := store.Capacity(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if capa.Reserved != 0 || capa.Allocated != capa.Committed+capa.Wasted || capa.Committed != uint64(inDB) {
		t.Fatalf("capacity after the sweep %+v: want nothing reserved, allocated = committed + wasted, committed = %d links", capa, inDB)
	}
	out, err := s.runControlCommand(t, "alloc", "verify")
	if err != nil || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("control alloc verify: %v\n%s", err, out)
	}
	// The sweep's sealed events go out through the outbox like any change:
	// one more control process relays them, and the edge then knows every
	// killed process's segment as sealed.
	relay := s.startControl(t, e.URL, "--id-step", step)
	waitApplied(t, e, s.pg.Pool(), 2*time.Minute)
	for _, p := range phases[:len(phases)-1] {
		for _, iv := range p.intervals {
			if !e.E.Segments.Sealed(iv.Start) {
				t.Fatalf("the edge does not know killed pid %d's segment %v as sealed", p.c.Pid, iv)
			}
		}
	}
	relay.Stop(t)

	var perPid, unpub []string
	for _, p := range phases {
		note := fmt.Sprintf("pid %d: %d 201s in %d intervals", p.c.Pid, p.answered, len(p.intervals))
		if p.killed {
			unpub = append(unpub, fmt.Sprint(p.unpubAtEnd))
			note += fmt.Sprintf(", killed with %d creates in flight", p.inFlight)
		}
		perPid = append(perPid, note)
	}
	evidence.Record(t, evidence.UniqueIDs,
		"%d control processes (%d SIGKILLed mid-create, 4 concurrent clients, step %s): %d 201s, every code decoded to an ID handed out once and inside an interval the audit confirmed for the answering process (%s); %d create attempts got no answer (cut by the kill, or refused while no control ran) and were never counted on",
		len(phases), kills, step, led.Len(), strings.Join(perPid, "; "), noAnswer.Load())
	evidence.Record(t, evidence.DisjointIntervals,
		"the %d intervals %d control processes leased (%d of them SIGKILLed) are pairwise disjoint, read from the audit in ID order [%d, %d); alloc verify agrees",
		len(ivs), len(phases), kills, ivs[0].Start, ivs[len(ivs)-1].End)
	evidence.Record(t, evidence.NoRollback,
		"each restarted control leased only above every interval of the processes before it, killed ones included: %s", intervalSummary(phases))
	evidence.Record(t, evidence.Jumpable,
		"all %d 201s (plus %d link(s) committed by creates the kill cut off) are in the database and 302 on the edge; the edge applied version %d = the outbox's newest after the kill (%s outbox rows were unpublished at each kill); right after its 201, %d of %d answered 503 (no authority between kill and restart), none 404",
		led.Len(), unanswered, applied, strings.Join(unpub, ", "), notYet.Load(), led.Len())
	evidence.Record(t, evidence.WasteAccounted,
		"open at the kill: %s; control alloc status listed them: %q; after the sweep: %s; the killed processes wasted %d of their %d IDs; capacity %+v; alloc verify: %s",
		strings.Join(openAtKill, "; "), statusLines, strings.Join(wasteNotes, "; "), wasteKilled, lenKilled, capa, strings.TrimSpace(out))
}

func intervalSummary(phases []*killPhase) string {
	var b strings.Builder
	for i, p := range phases {
		if i > 0 {
			b.WriteString(" then ")
		}
		lo, hi := ^uint64(0), uint64(0)
		for _, iv := range p.intervals {
			lo, hi = min(lo, iv.Start), max(hi, iv.End)
		}
		state := "stopped"
		if p.killed {
			state = "killed"
		}
		fmt.Fprintf(&b, "pid %d (%s) [%d, %d) in %d intervals", p.c.Pid, state, lo, hi, len(p.intervals))
	}
	return b.String()
}

// lineWith returns the first line of text containing s, trimmed.
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// onStream describes what the change stream holds for code and around
// version v: a failure's diagnosis.
func onStream(t *testing.T, s *env, code string, v uint64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, js := s.nats.Client(t)
	cons, err := js.OrderedConsumer(ctx, linkevent.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return strings.Join(append(out, err.Error()), "; ")
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, _ := msg.Metadata()
			evs, err := linkevent.Decode(msg.Data(), nil)
			if err != nil {
				out = append(out, fmt.Sprintf("seq %d undecodable", meta.Sequence.Stream))
				continue
			}
			for _, ev := range evs {
				if ev.Code == code || (ev.Version+2 >= v && ev.Version <= v+2) {
					out = append(out, fmt.Sprintf("seq %d v%d prev %d %s %s", meta.Sequence.Stream, ev.Version, ev.Prev, ev.Kind, ev.Code))
				}
			}
		}
		if n == 0 {
			return strings.Join(out, "; ")
		}
	}
}
