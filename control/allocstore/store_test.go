package allocstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/idalloctest"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
)

// These tests record every ID handed out and every confirmed interval
// themselves, and compare them with the audit: the links table's unique
// index would hide an allocator that hands out an ID twice.

type allocIDLog struct {
	mu   sync.Mutex
	ids  map[uint64]string // ID -> who took it
	dups []string
	segs []idalloc.Segment
}

func newAllocIDLog() *allocIDLog { return &allocIDLog{ids: map[uint64]string{}} }

func (l *allocIDLog) id(who string, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.ids[id]; ok {
		l.dups = append(l.dups, fmt.Sprintf("%d by %s and %s", id, prev, who))
	}
	l.ids[id] = who
}

func (l *allocIDLog) seg(s idalloc.Segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.segs = append(l.segs, s)
}

// take hands out n IDs of namespace ns from a, records each as taken by
// who, and returns them in order.
func (l *allocIDLog) take(t *testing.T, ctx context.Context, a *idalloc.Allocator, ns, who string, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for range n {
		id, err := a.Next(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		l.id(who, id)
		ids = append(ids, id)
	}
	return ids
}

// check: no duplicate ID, confirmed segments pairwise disjoint, every ID in
// a confirmed segment, and the confirmed segments are exactly the audit's.
func (l *allocIDLog) check(t *testing.T, store *Store, ns string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 {
		t.Errorf("IDs handed out twice: %v", l.dups[:min(20, len(l.dups))])
	}
	segs := append([]idalloc.Segment(nil), l.segs...)
	sort.Slice(segs, func(i, j int) bool { return segs[i].Start < segs[j].Start })
	for i := 1; i < len(segs); i++ {
		if segs[i].Start < segs[i-1].End {
			t.Errorf("confirmed intervals overlap: %+v and %+v", segs[i-1], segs[i])
		}
	}
	for id, who := range l.ids {
		k := sort.Search(len(segs), func(i int) bool { return segs[i].End > id })
		if k == len(segs) || id < segs[k].Start {
			t.Errorf("ID %d (taken by %s) is in no confirmed interval", id, who)
		}
	}
	ivs, err := store.Intervals(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(ivs) != len(segs) {
		t.Fatalf("audit has %d intervals, allocators confirmed %d", len(ivs), len(segs))
	}
	for i := range ivs {
		if ivs[i].Start != segs[i].Start || ivs[i].End != segs[i].End || ivs[i].RequestID != segs[i].RequestID {
			t.Errorf("audit %v differs from confirmed %+v", ivs[i], segs[i])
		}
	}
}

// counts reports how many IDs, duplicates and confirmed segments l holds, for
// gate evidence.
func (l *allocIDLog) counts() (ids, dups, segs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids), len(l.dups), len(l.segs)
}

// allocTestStart is idalloctest.Start that also waits for the first
// segment.
func allocTestStart(t testing.TB, store idalloc.Store, cfg idalloc.Config) *idalloc.Allocator {
	t.Helper()
	a := idalloctest.Start(t, store, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.WaitLoaded(ctx); err != nil {
		t.Fatalf("first segment: %v", err)
	}
	return a
}

// allocClose drains a so that no lease is in flight when the test compares
// what it confirmed with the audit.
func allocClose(t testing.TB, a *idalloc.Allocator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.Close(ctx) // segments whose IDs had no Done stay open
}

// allocTestProxy forwards TCP between Postgres clients and the server and
// can black-hole traffic or cut a client connection right after forwarding
// its COMMIT.
type allocTestProxy struct {
	ln      net.Listener
	target  string
	mode    atomic.Int32 // allocProxyPass, allocProxyBlackhole, allocProxyCutCommit
	cuts    atomic.Int32
	mu      sync.Mutex
	conns   []net.Conn
	stopped chan struct{}
	wg      sync.WaitGroup
}

const (
	allocProxyPass int32 = iota
	allocProxyBlackhole
	allocProxyCutCommit
)

func newAllocTestProxy(t *testing.T, target string) *allocTestProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &allocTestProxy{ln: ln, target: target, stopped: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		close(p.stopped)
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *allocTestProxy) addr() string { return p.ln.Addr().String() }

func (p *allocTestProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *allocTestProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		// cut is set before a COMMIT is forwarded: from then on the
		// server's replies are dropped, so the COMMIT's reply cannot reach
		// the client while the forwarding side is still closing it (on a
		// busy machine that window is long).
		var cut atomic.Bool
		p.wg.Go(func() { p.pipe(client, server, true, &cut) })
		p.wg.Go(func() { p.pipe(server, client, false, &cut) })
	}
}

func (p *allocTestProxy) pipe(src, dst net.Conn, fromClient bool, cutPair *atomic.Bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for p.mode.Load() == allocProxyBlackhole {
				select {
				case <-p.stopped:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			chunk := buf[:n]
			if !fromClient && cutPair.Load() {
				io.Copy(io.Discard, src)
				return
			}
			cut := fromClient && p.mode.Load() == allocProxyCutCommit &&
				bytes.Contains(bytes.ToLower(chunk), []byte("commit")) &&
				p.mode.CompareAndSwap(allocProxyCutCommit, allocProxyPass)
			if cut {
				cutPair.Store(true)
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
			if cut {
				// COMMIT reached the server; the client never hears back:
				// the other direction drops the reply. The server's side
				// stays open until the test ends, so the server meets no
				// reset before it has read the COMMIT.
				p.cuts.Add(1)
				src.Close()
				<-p.stopped
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// allocPools returns a direct pool and one through a new proxy, on one fresh
// database.
func allocPools(t *testing.T) (direct, proxied *pgxpool.Pool, proxy *allocTestProxy) {
	t.Helper()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	direct, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = newAllocTestProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.addr())
	pn, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(pn)
	cfg.MaxConns = 4
	proxied, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxied.Close)
	return direct, proxied, proxy
}

func allocReqID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// 3. COMMIT acknowledged but the reply lost.
func TestAllocCommitReplyLost(t *testing.T) {
	direct, proxied, proxy := allocPools(t)
	store, check := New(proxied), New(direct)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := idalloc.Namespace{Name: "lost", Start: 1, End: 1_000_000, Step: 10}
	if err := store.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	first, err := store.Lease(ctx, idalloc.LeaseRequest{RequestID: allocReqID(1), Namespace: ns.Name, Instance: "a"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("store retry is idempotent", func(t *testing.T) {
		proxy.mode.Store(allocProxyCutCommit)
		req := idalloc.LeaseRequest{RequestID: allocReqID(2), Namespace: ns.Name, Instance: "a"}
		_, err := store.Lease(ctx, req)
		if !errors.Is(err, idalloc.ErrCommitUnknown) {
			t.Fatalf("lease with the COMMIT reply cut: %v, want ErrCommitUnknown", err)
		}
		if proxy.cuts.Load() != 1 {
			t.Fatalf("proxy cut %d connections, want 1", proxy.cuts.Load())
		}
		// The server did commit it.
		var committed []Interval
		poll.Until(t, "the unknown lease is committed", 10*time.Second, func() bool {
			committed, err = check.Intervals(ctx, ns.Name)
			return err == nil && len(committed) == 2
		})
		// The retry under the same request id gets the same interval ...
		again, err := store.Lease(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.Start != committed[1].Start || again.End != committed[1].End || again.Start != first.End {
			t.Errorf("retry got [%d, %d), committed [%d, %d)", again.Start, again.End, committed[1].Start, committed[1].End)
		}
		// ... and a new request a disjoint one.
		next, err := store.Lease(ctx, idalloc.LeaseRequest{RequestID: allocReqID(3), Namespace: ns.Name, Instance: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if next.Start != again.End {
			t.Errorf("next lease [%d, %d), want it to start at %d", next.Start, next.End, again.End)
		}
		evidence.Record(t, evidence.UnknownCommitsUnpublished,
			"COMMIT reached Postgres, reply cut by a proxy: lease failed as ErrCommitUnknown; the server had committed [%d, %d); "+
				"the retry under the same request id got exactly [%d, %d), the next request [%d, %d)",
			committed[1].Start, committed[1].End, again.Start, again.End, next.Start, next.End)
	})

	t.Run("allocator publishes only the confirmed interval", func(t *testing.T) {
		ns := idalloc.Namespace{Name: "lost-alloc", Start: 1_000_000, End: 2_000_000, Step: 10}
		log := newAllocIDLog()
		a := allocTestStart(t, store, idalloctest.Config(t, log.seg, ns))
		cuts := proxy.cuts.Load()
		proxy.mode.Store(allocProxyCutCommit)
		for i := 0; proxy.cuts.Load() == cuts || i < 100; i++ {
			if i > 10_000 {
				t.Fatal("no lease COMMIT went through the proxy")
			}
			id, err := a.Next(ctx, ns.Name) // no Done: no seal transactions
			if err != nil {
				t.Fatal(err)
			}
			log.id("a", id)
		}
		s, _ := a.Stats(ns.Name)
		if s.Failures == 0 {
			t.Errorf("stats %+v: want the lost reply counted as a failure", s)
		}
		allocClose(t, a)
		log.check(t, check, ns.Name)
		ids, dups, segs := log.counts()
		evidence.Record(t, evidence.UnknownCommitsUnpublished,
			"allocator with a lease COMMIT reply cut (%d failed loads): %d IDs handed out, %d duplicates, all inside the %d confirmed segments, which equal the audit",
			s.Failures, ids, dups, segs)
	})
	rep, err := check.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
}

// 4. Several allocator instances on separate pools, concurrently.
func TestAllocManyInstancesDisjoint(t *testing.T) {
	dsn := pgtest.DSN(t)
	ns := idalloc.Namespace{Name: "multi", Start: 1, End: 10_000_000, Step: 7}
	other := idalloc.Namespace{Name: "multi-b", Start: 10_000_000, End: 20_000_000, Step: 5}
	log := newAllocIDLog()
	var wg sync.WaitGroup
	var checkStore *Store
	var allocs []*idalloc.Allocator
	for inst := range 4 {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		store := New(pool)
		checkStore = store
		a := allocTestStart(t, store, idalloctest.Config(t, log.seg, ns, other))
		allocs = append(allocs, a)
		for g := range 4 {
			wg.Go(func() {
				who := fmt.Sprintf("instance %d goroutine %d", inst, g)
				for i := range 200 {
					name := ns.Name
					if i%4 == 0 {
						name = other.Name
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					id, err := a.Next(ctx, name)
					cancel()
					if err != nil {
						t.Errorf("%s: %v", who, err)
						return
					}
					log.id(who, id)
					a.Done(id, true)
				}
			})
		}
	}
	wg.Wait()
	for _, a := range allocs {
		allocClose(t, a)
	}
	log.check(t, checkStore, "")
	rep, err := checkStore.Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	ids, dups, segs := log.counts()
	evidence.Record(t, evidence.DisjointIntervals,
		"4 instances on separate pools, 16 goroutines, 2 namespaces (steps 7 and 5): %d confirmed segments pairwise disjoint and equal to the audit (%d intervals, %d violations)",
		segs, rep.Intervals, len(rep.Violations))
	evidence.Record(t, evidence.UniqueIDs,
		"4 concurrent instances: %d IDs handed out, %d duplicates, each inside a confirmed segment", ids, dups)
}

// 5. A network timeout: the proxy black-holes the authority.
func TestAllocNetworkTimeoutRecovers(t *testing.T) {
	direct, proxied, proxy := allocPools(t)
	store := New(proxied)
	ns := idalloc.Namespace{Name: "net", Start: 1, End: 1_000_000, Step: 4}
	log := newAllocIDLog()
	cfg := idalloctest.Config(t, log.seg, ns)
	// Short enough that a black-holed lease times out soon, long enough
	// that a lease through the restored proxy finishes on a busy machine.
	cfg.LoadTimeout = 2 * time.Second
	a := allocTestStart(t, store, cfg)
	proxy.mode.Store(allocProxyBlackhole)
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("Next kept succeeding with the authority black-holed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		id, err := a.Next(ctx, ns.Name)
		cancel()
		if err != nil {
			if !idalloc.Retryable(err) {
				t.Fatalf("Next with the authority black-holed: %v, want retryable", err)
			}
			break
		}
		log.id("a", id)
		a.Done(id, true)
	}
	poll.Until(t, "timeout classified", 10*time.Second, func() bool {
		s, _ := a.Stats(ns.Name)
		return s.LastFailure == "unavailable"
	})
	proxy.mode.Store(allocProxyPass)
	poll.Until(t, "recovery", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		id, err := a.Next(ctx, ns.Name)
		if err == nil {
			log.id("a", id)
			a.Done(id, true)
		}
		return err == nil
	})
	for range 20 {
		id, err := a.Next(context.Background(), ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		log.id("a", id)
		a.Done(id, true)
	}
	allocClose(t, a)
	log.check(t, New(direct), ns.Name)
	ids, dups, segs := log.counts()
	evidence.Record(t, evidence.ReserveThenReject,
		"authority black-holed: Next kept handing out the held segments, then failed retryable (%q) within its 100ms deadline; "+
			"after the network came back allocation resumed; %d IDs from %d segments, %d duplicates",
		"unavailable", ids, segs, dups)
}

const allocChildEnv = "EDGELINK_ALLOC_CHILD_DSN"

// TestAllocKilledChild is the child of TestAllocSIGKILLNeverReused: it only
// runs when started by it (with the DSN in its environment).
func TestAllocKilledChild(t *testing.T) {
	dsn := os.Getenv(allocChildEnv)
	if dsn == "" {
		return
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	ns := idalloc.Namespace{Name: "killed", Start: 1, End: 1_000_000, Step: 50}
	var segs atomic.Int32
	cfg := idalloc.Config{Namespaces: []idalloc.Namespace{ns}, Instance: "child", OnSegment: func(s idalloc.Segment) {
		segs.Add(1)
		fmt.Printf("SEG %d %d\n", s.Start, s.End)
	}}
	a, err := idalloc.New(context.Background(), New(pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Take IDs until the second segment is in use.
	for i := 0; i < 60 || segs.Load() < 2; i++ {
		id, err := a.Next(context.Background(), ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ID %d\n", id)
	}
	fmt.Println("READY")
	select {} // until SIGKILL
}

// 6. A process killed with SIGKILL after taking two segments.
func TestAllocSIGKILLNeverReused(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAllocKilledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), allocChildEnv+"="+dsn)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	childIDs := map[uint64]bool{}
	var childSegs [][2]uint64
	ready := make(chan error, 1)
	go func() {
		defer close(waited)
		sc := bufio.NewScanner(out)
		isReady := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "ID":
				v, _ := strconv.ParseUint(f[1], 10, 64)
				childIDs[v] = true
			case len(f) == 3 && f[0] == "SEG":
				s, _ := strconv.ParseUint(f[1], 10, 64)
				e, _ := strconv.ParseUint(f[2], 10, 64)
				childSegs = append(childSegs, [2]uint64{s, e})
			case len(f) == 1 && f[0] == "READY":
				isReady = true
				ready <- nil
			}
		}
		if !isReady {
			ready <- errors.New("child exited before READY")
		}
		_ = cmd.Wait()
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("child not ready in time")
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	if len(childSegs) < 2 || len(childIDs) < 60 {
		t.Fatalf("child took %d IDs from %d segments, want >= 60 from >= 2", len(childIDs), len(childSegs))
	}

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := New(pool)
	var childLen uint64
	for _, s := range childSegs {
		childLen += s[1] - s[0]
	}
	// The dead child's segments are reserved until swept, then wasted.
	c, err := store.Capacity(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	if c.Reserved != childLen || c.Allocated != childLen {
		t.Errorf("capacity before sweep %+v: want %d reserved by the dead child", c, childLen)
	}
	poll.Until(t, "the dead child's segments are swept", 20*time.Second, func() bool {
		n, err := store.SealAbandoned(ctx, "test", 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		c, _ = store.Capacity(ctx, "killed")
		return n >= 0 && c.Reserved == 0
	})
	if c.Wasted != childLen || c.Committed != 0 {
		t.Errorf("capacity after sweep %+v: want the child's %d IDs wasted (no link was created)", c, childLen)
	}

	// The next instance never reuses an ID the child had.
	log := newAllocIDLog()
	for id := range childIDs {
		log.id("killed child", id)
	}
	ns := idalloc.Namespace{Name: "killed", Start: 1, End: 1_000_000, Step: 50}
	a := allocTestStart(t, store, idalloctest.Config(t, log.seg, ns))
	for _, id := range log.take(t, ctx, a, ns.Name, "next instance", 200) {
		for _, s := range childSegs {
			if id >= s[0] && id < s[1] {
				t.Fatalf("next instance handed out %d from the dead child's segment [%d, %d)", id, s[0], s[1])
			}
		}
	}
	if len(log.dups) > 0 {
		t.Errorf("reused IDs: %v", log.dups[:min(10, len(log.dups))])
	}
	evidence.Record(t, evidence.NoRollback,
		"process SIGKILLed holding %d segments (%d IDs taken): the next instance handed out 200 IDs, none in the dead one's segments, %d reused",
		len(childSegs), len(childIDs), len(log.dups))
	evidence.Record(t, evidence.WasteAccounted,
		"SIGKILLed instance: its %d IDs were reserved until the sweeper sealed them, then counted wasted %d, committed %d",
		childLen, c.Wasted, c.Committed)
}

// 7. A lagging authority: counter rolled back below the audit.
func TestAllocLaggingAuthorityFenced(t *testing.T) {
	ns := idalloc.Namespace{Name: "lag", Start: 1, End: 1_000_000, Step: 10}
	store, pool := storeWith(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var segs []idalloc.Segment
	for i := range 3 {
		s, err := store.Lease(ctx, idalloc.LeaseRequest{RequestID: allocReqID(i), Namespace: ns.Name, Instance: "old-primary"})
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, s)
	}
	// As a promoted replica that missed the last two advances would have it.
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = $1 WHERE namespace = $2`, int64(segs[1].Start), ns.Name); err != nil {
		t.Fatal(err)
	}
	_, err := store.Lease(ctx, idalloc.LeaseRequest{RequestID: allocReqID(10), Namespace: ns.Name, Instance: "new"})
	if !errors.Is(err, idalloc.ErrFenced) {
		t.Fatalf("lease on a lagging counter: %v, want ErrFenced", err)
	}
	a, err := idalloc.New(ctx, store, idalloctest.Config(t, newAllocIDLog().seg, ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	if err := a.WaitLoaded(ctx); !errors.Is(err, idalloc.ErrFenced) {
		t.Errorf("WaitLoaded on a lagging counter: %v, want ErrFenced", err)
	}
	if _, err := a.Next(ctx, ns.Name); !errors.Is(err, idalloc.ErrFenced) || idalloc.Retryable(err) {
		t.Errorf("Next on a lagging counter: %v, want ErrFenced", err)
	}
	rep, err := store.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, v := range rep.Violations {
		named = append(named, fmt.Sprintf("%s [%d, %d)", v.Kind, v.Interval.Start, v.Interval.End))
	}
	want := []string{
		fmt.Sprintf("above_counter [%d, %d)", segs[1].Start, segs[1].End),
		fmt.Sprintf("above_counter [%d, %d)", segs[2].Start, segs[2].End),
	}
	if fmt.Sprint(named) != fmt.Sprint(want) {
		t.Errorf("Verify named %v, want %v", named, want)
	}

	// Overlapping audit rows (only possible with the exclusion constraint
	// gone, as on a hand-repaired database) are named in pairs.
	if _, err := pool.Exec(ctx, `ALTER TABLE alloc_audit DROP CONSTRAINT alloc_audit_disjoint`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO alloc_audit (request_id, namespace, seg_start, seg_end, instance, epoch)
		VALUES ($1, $2, $3, $4, 'split-brain', 1)`, allocReqID(99), ns.Name, int64(segs[0].Start+5), int64(segs[0].End+5)); err != nil {
		t.Fatal(err)
	}
	rep, err = store.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	overlaps := 0
	for _, v := range rep.Violations {
		if v.Kind == "overlap" {
			overlaps++
			if !strings.Contains(v.String(), "split-brain") {
				t.Errorf("overlap %s does not name the split-brain interval", v)
			}
		}
	}
	if overlaps != 2 { // with segs[0] and segs[1]
		t.Errorf("Verify found %d overlaps, want 2: %v", overlaps, rep.Violations)
	}
	evidence.Record(t, evidence.NoRollback,
		"counter rolled back below its audit (as on a promoted lagging replica): lease refused with ErrFenced, a new allocator fenced at start, Verify named %v",
		named)
}

// 7b. A lagging authority that lost its audit too (a replica promoted before
// the last leases reached it): the store cannot tell, the allocator can.
func TestAllocAuthorityRegressionSeenByInstance(t *testing.T) {
	pool := pgtest.Pool(t)
	store := New(pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := idalloc.Namespace{Name: "regress", Start: 1, End: 1_000_000, Step: 5}
	log := newAllocIDLog()
	a := allocTestStart(t, store, idalloctest.Config(t, log.seg, ns))
	log.take(t, ctx, a, ns.Name, "a", 12)
	// Forget every lease from the current segment on, on the authority.
	log.mu.Lock()
	lost := log.segs[1].Start
	log.mu.Unlock()
	if _, err := pool.Exec(ctx, `DELETE FROM alloc_audit WHERE namespace = $1 AND seg_start >= $2`, ns.Name, int64(lost)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = $2 WHERE namespace = $1`, ns.Name, int64(lost)); err != nil {
		t.Fatal(err)
	}
	var fenced error
	for i := 0; fenced == nil; i++ {
		if i > 1000 {
			t.Fatal("allocator kept handing out IDs after the authority went back")
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		id, err := a.Next(ctx, ns.Name)
		cancel()
		if err != nil {
			fenced = err
			break
		}
		log.id("a", id)
	}
	if !errors.Is(fenced, idalloc.ErrFenced) {
		t.Errorf("Next after the authority went back: %v, want ErrFenced", fenced)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.dups) > 0 {
		t.Errorf("IDs handed out twice: %v", log.dups)
	}
	evidence.Record(t, evidence.NoRollback,
		"authority lost its counter and audit from %d on: the running instance refused the regressed segment (%v) after %d IDs, %d duplicates",
		lost, errors.Is(fenced, idalloc.ErrFenced), len(log.ids), len(log.dups))
}

func TestAllocCapacityAndVerifyClean(t *testing.T) {
	pool := pgtest.Pool(t)
	store := New(pool)
	ctx := context.Background()
	ns := idalloc.Namespace{Name: "cap", Start: 100, End: 1100, Step: 100}
	a := allocTestStart(t, store, idalloctest.Config(t, newAllocIDLog().seg, ns))
	for i := range 150 {
		id, err := a.Next(ctx, ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		a.Done(id, i%3 != 0)
	}
	var c idalloc.Capacity
	poll.Until(t, "first segment sealed", 10*time.Second, func() bool {
		var err error
		c, err = a.Capacity(ctx, ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		return c.Committed > 0
	})
	if c.Total != 1000 || c.Allocated+c.Remaining != c.Total || c.Committed+c.Wasted+c.Reserved != c.Allocated {
		t.Errorf("capacity %+v does not add up", c)
	}
	// IDs handed out here make no links: no creates, so no rate and no
	// time left, whatever was leased.
	if c.Rate != 0 || !math.IsInf(c.DaysLeft, 1) {
		t.Errorf("capacity %+v: want no create rate and +Inf days left without links", c)
	}
	if c.Committed != 66 || c.Wasted != 34 { // first segment sealed: 100 IDs, 34 rolled back
		t.Errorf("capacity %+v: want the sealed first segment as 66 committed, 34 wasted", c)
	}
	rep, err := store.Verify(ctx)
	if err != nil || !rep.OK() || rep.Intervals < 2 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	evidence.Record(t, evidence.WasteAccounted,
		"150 IDs, every third create rolled back: capacity total %d = allocated %d + remaining %d; allocated = committed %d + wasted %d + reserved %d; no links made, so create rate %v and days left %v",
		c.Total, c.Allocated, c.Remaining, c.Committed, c.Wasted, c.Reserved, c.Rate, c.DaysLeft)
}
