package store

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// testKeys is a key file with the keys k1 and k2 (test keys, not secrets).
func testKeys(t testing.TB) *ff1.Keys {
	t.Helper()
	k, err := ff1.ParseKeys(strings.NewReader("k1 AAECAwQFBgcICQoLDA0ODw==\nk2 EBESExQVFhcYGRobHB0eHw==\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func domainConf(id link.DomainID, host string, version uint64) link.Domain {
	return link.Domain{ID: id, Host: host, TenantID: int64(id), CodeMode: link.CodesFF1, KeyIDs: []string{"k1"},
		Status: link.DomainActive, Version: version}
}

func byHost(t *testing.T, d *Domains, host string) (link.DomainID, bool) {
	t.Helper()
	s, ok := d.ByHost([]byte(host))
	if !ok {
		return 0, false
	}
	return s.Conf.ID, true
}

func TestDomainsApply(t *testing.T) {
	d := NewDomains(testKeys(t))
	if d.Known() {
		t.Fatal("an empty table reports Known")
	}
	if s, ok := d.Get(link.DefaultDomain); !ok || s.Conf.CodeMode != link.CodesSequential {
		t.Fatalf("Get(platform) before any table = %+v, %v; want a sequential platform domain", s, ok)
	}
	if err := d.Apply(domainConf(3, "go.acme.test", 5)); err != nil {
		t.Fatal(err)
	}
	if d.Known() {
		t.Error("a tenant's domain alone made the table Known: the platform's host would 404")
	}
	s, ok := d.ByHost([]byte("go.acme.test"))
	if !ok || s.Conf.ID != 3 || s.Undecodable || len(s.Codes) != 2 || s.Codes[0].Domain() != "go.acme.test" {
		t.Fatalf("ByHost(go.acme.test) = %+v, %v; want domain 3 with k1's decoder, then the file's other key", s, ok)
	}
	if _, ok := d.ByHost([]byte("acme.test")); ok {
		t.Error("an unknown host resolved")
	}
	// An older or equal version changes nothing.
	older := domainConf(3, "old.acme.test", 5)
	if err := d.Apply(older); err != nil {
		t.Fatal(err)
	}
	if id, ok := byHost(t, d, "go.acme.test"); !ok || id != 3 {
		t.Errorf("an equal version replaced the domain: go.acme.test → %d, %v", id, ok)
	}
	if _, ok := d.ByHost([]byte("old.acme.test")); ok {
		t.Error("an equal version's host resolved")
	}
	// A move: the old host stops resolving.
	if err := d.Apply(domainConf(3, "acme.test", 6)); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.ByHost([]byte("go.acme.test")); ok {
		t.Error("the old host still resolves after the domain moved")
	}
	if id, ok := byHost(t, d, "acme.test"); !ok || id != 3 {
		t.Errorf("acme.test → %d, %v; want 3", id, ok)
	}
	// The platform's domain makes the table Known.
	platform := link.Domain{ID: 0, Host: "edge.test", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 7}
	if err := d.Apply(platform); err != nil {
		t.Fatal(err)
	}
	if !d.Known() {
		t.Error("the platform's domain applied, yet not Known")
	}
	if s, ok := d.Get(link.DefaultDomain); !ok || s.Conf.Host != "edge.test" {
		t.Errorf("Get(platform) = %+v, %v; want the applied one", s, ok)
	}
}

func TestDomainsRemoved(t *testing.T) {
	d := NewDomains(testKeys(t))
	must(t, d.Apply(domainConf(4, "short.test", 1)))
	removed := domainConf(4, "short.test", 2)
	removed.Status = link.DomainRemoved
	must(t, d.Apply(removed))
	if _, ok := d.ByHost([]byte("short.test")); ok {
		t.Fatal("a removed domain's host still resolves")
	}
	if s, ok := d.Get(4); !ok || s.Conf.Status != link.DomainRemoved {
		t.Errorf("Get(4) = %+v, %v; want it, removed", s, ok)
	}
	// The event that made it active, replayed, does not bring it back.
	must(t, d.Apply(domainConf(4, "short.test", 1)))
	if _, ok := d.ByHost([]byte("short.test")); ok {
		t.Error("a replayed older event brought a removed domain back")
	}
	// Another domain may take the host afterwards.
	must(t, d.Apply(domainConf(9, "short.test", 3)))
	if id, ok := byHost(t, d, "short.test"); !ok || id != 9 {
		t.Errorf("short.test → %d, %v; want the new domain 9", id, ok)
	}
}

func TestDomainsReplaceKeepsNewerApplied(t *testing.T) {
	d := NewDomains(testKeys(t))
	// Applied from the stream after the snapshot was built.
	must(t, d.Apply(domainConf(2, "new-host.test", 20)))
	must(t, d.Apply(domainConf(5, "only-stream.test", 21)))
	if err := d.Replace(nil); err != nil || d.Known() {
		t.Fatalf("Replace(nil) = %v, Known %v; want no change", err, d.Known())
	}
	must(t, d.Replace([]link.Domain{
		{ID: 0, Host: "edge.test", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1},
		domainConf(2, "old-host.test", 10),
		domainConf(3, "third.test", 11),
	}))
	if !d.Known() {
		t.Error("a snapshot's table did not make the table Known")
	}
	for host, want := range map[string]link.DomainID{"edge.test": 0, "new-host.test": 2, "third.test": 3, "only-stream.test": 5} {
		if id, ok := byHost(t, d, host); !ok || id != want {
			t.Errorf("%s → %d, %v; want %d", host, id, ok, want)
		}
	}
	if _, ok := d.ByHost([]byte("old-host.test")); ok {
		t.Error("the snapshot's older host of domain 2 replaced the stream's newer one")
	}
	// A newer snapshot wins over what was applied.
	must(t, d.Replace([]link.Domain{domainConf(2, "newest.test", 30)}))
	if id, ok := byHost(t, d, "newest.test"); !ok || id != 2 {
		t.Errorf("newest.test → %d, %v; want 2", id, ok)
	}
	if _, ok := d.ByHost([]byte("new-host.test")); ok {
		t.Error("domain 2's previous host still resolves")
	}
}

func TestDomainsUndecodable(t *testing.T) {
	d := NewDomains(testKeys(t))
	missing := domainConf(6, "rotated.test", 1)
	missing.KeyIDs = []string{"k3", "k1"} // the current key is not in the edge's file
	must(t, d.Apply(missing))
	must(t, d.Apply(domainConf(7, "fine.test", 1)))
	sequential := domainConf(8, "seq.test", 1)
	sequential.CodeMode, sequential.KeyIDs = link.CodesSequential, nil
	must(t, d.Apply(sequential))
	s, ok := d.ByHost([]byte("rotated.test"))
	if !ok || !s.Undecodable || s.Codes != nil {
		t.Fatalf("a domain with a missing key = %+v, %v; want Undecodable without decoders", s, ok)
	}
	if s, _ := d.ByHost([]byte("seq.test")); s.Undecodable || s.Codes != nil {
		t.Errorf("a sequential domain = %+v; want no decoders, decodable", s)
	}
	if n := d.Undecodable(); n != 1 {
		t.Errorf("Undecodable() = %d; want 1", n)
	}
	// Rotating to keys the file has makes it decodable, with both keys in
	// order.
	fixed := domainConf(6, "rotated.test", 2)
	fixed.KeyIDs = []string{"k2", "k1"}
	must(t, d.Apply(fixed))
	s, _ = d.ByHost([]byte("rotated.test"))
	if s.Undecodable || len(s.Codes) != 2 || d.Undecodable() != 0 {
		t.Fatalf("after the rotation: %+v, Undecodable() %d; want 2 decoders", s, d.Undecodable())
	}
	code, err := s.Codes[0].Encode(12345)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := s.Codes[0].Decode(code[:]); !ok || id != 12345 {
		t.Errorf("the current key's decoder: %s → %d, %v", code, id, ok)
	}
	// Without a key file at all every FF1 domain is undecodable.
	none := NewDomains(nil)
	must(t, none.Apply(domainConf(7, "fine.test", 1)))
	if s, _ := none.ByHost([]byte("fine.test")); !s.Undecodable {
		t.Error("an FF1 domain decodes without any key")
	}
}

func TestDomainsRefuseInvalid(t *testing.T) {
	d := NewDomains(testKeys(t))
	must(t, d.Apply(domainConf(2, "good.test", 1)))
	for name, c := range map[string]link.Domain{
		"host not canonical": domainConf(2, "Good.TEST", 2),
		"host with a port":   domainConf(2, "good.test:8080", 2),
		"no host":            domainConf(2, "", 2),
		"mode":               {ID: 2, Host: "good.test", CodeMode: "rot13", Status: link.DomainActive, Version: 2},
		"status":             {ID: 2, Host: "good.test", CodeMode: link.CodesSequential, Status: "gone", Version: 2},
		"number":             domainConf(link.MaxDomainID+1, "other.test", 2),
	} {
		if err := d.Apply(c); !errors.Is(err, errDomainConf) {
			t.Errorf("%s: Apply = %v; want errDomainConf", name, err)
		}
	}
	if id, ok := byHost(t, d, "good.test"); !ok || id != 2 || d.Refused.Load() != 6 {
		t.Errorf("after refusals: good.test → %d, %v, Refused %d; want 2 unchanged, 6 refused", id, ok, d.Refused.Load())
	}
	// Replace skips the bad entry and keeps the good ones.
	err := d.Replace([]link.Domain{domainConf(3, "BAD", 1), domainConf(4, "four.test", 1)})
	if !errors.Is(err, errDomainConf) {
		t.Errorf("Replace with a bad entry = %v; want errDomainConf", err)
	}
	if id, ok := byHost(t, d, "four.test"); !ok || id != 4 {
		t.Errorf("four.test → %d, %v; want 4 despite its bad neighbour", id, ok)
	}
}

func TestDomainsByHostDoesNotAllocate(t *testing.T) {
	d := NewDomains(testKeys(t))
	must(t, d.Apply(domainConf(2, "go.acme.test", 1)))
	var buf [64]byte
	host := []byte("Go.Acme.Test:8443")
	if n := testing.AllocsPerRun(100, func() {
		key, ok := link.AppendHostKey(buf[:0], host)
		if s, found := d.ByHost(key); !ok || !found || s.Conf.ID != 2 {
			t.Fatal("go.acme.test not found")
		}
		if _, found := d.ByHost([]byte("unknown.test")); found {
			t.Fatal("unknown.test found")
		}
	}); n != 0 {
		t.Errorf("ByHost allocated %v times", n)
	}
}

// Readers see one whole table or the next, never a mix, while writers
// apply and replace concurrently (run with -race).
func TestDomainsConcurrent(t *testing.T) {
	d := NewDomains(testKeys(t))
	const domains, versions = 8, 200
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for i := 1; i <= domains; i++ {
					// Domain i lives at d<i>-<version>.test: whatever a
					// reader finds at a host must be domain i.
					for _, host := range []string{fmt.Sprintf("d%d-%d.test", i, versions), fmt.Sprintf("d%d-1.test", i)} {
						if s, ok := d.ByHost([]byte(host)); ok && (s.Conf.ID != link.DomainID(i) || s.Conf.Host != host) {
							t.Errorf("%s → domain %d at %s", host, s.Conf.ID, s.Conf.Host)
							return
						}
					}
					d.Known()
					d.Get(link.DomainID(i))
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for i := 1; i <= domains; i++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for v := uint64(1); v <= versions; v++ {
				c := domainConf(link.DomainID(i), fmt.Sprintf("d%d-%d.test", i, v), v)
				if v%10 == 0 {
					must(t, d.Replace([]link.Domain{c}))
				} else {
					must(t, d.Apply(c))
				}
			}
		}()
	}
	writers.Wait()
	stop.Store(true)
	wg.Wait()
	for i := 1; i <= domains; i++ {
		if id, ok := byHost(t, d, fmt.Sprintf("d%d-%d.test", i, versions)); !ok || id != link.DomainID(i) {
			t.Errorf("domain %d not at its last host", i)
		}
		if _, ok := d.ByHost([]byte(fmt.Sprintf("d%d-%d.test", i, versions-1))); ok {
			t.Errorf("domain %d still at its previous host", i)
		}
	}
	if d.Len() != domains {
		t.Errorf("Len() = %d; want %d", d.Len(), domains)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// A write copies only the shards it touches: applying one domain to a
// table of thousands leaves every other shard's maps shared with the
// table before, so a replay of many domain events costs each a 64th of
// the table, not all of it.
func TestDomainsWriteCopiesItsShardsOnly(t *testing.T) {
	d := NewDomains(testKeys(t))
	confs := make([]link.Domain, 5000)
	for i := range confs {
		confs[i] = domainConf(link.DomainID(i+1), fmt.Sprintf("d%d.test", i+1), 1)
	}
	must(t, d.Replace(confs))
	before := d.cur.Load()
	moved := domainConf(77, "moved.test", 2)
	must(t, d.Apply(moved))
	after := d.cur.Load()
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	copied := func(name string, n int, differs func(i int) bool, atMost int) {
		t.Helper()
		c := 0
		for i := range n {
			if differs(i) {
				c++
			}
		}
		if c == 0 || c > atMost {
			t.Errorf("%s: %d of %d shards copied; want 1 to %d", name, c, n, atMost)
		}
	}
	copied("byID", domainShards, func(i int) bool { return !same(before.byID[i], after.byID[i]) }, 1)
	copied("members", domainShards, func(i int) bool { return !same(before.members[i], after.members[i]) }, 2)
	copied("byHost", domainShards, func(i int) bool { return !same(before.byHost[i], after.byHost[i]) }, 2)
	if _, ok := d.ByHost([]byte("d77.test")); ok {
		t.Error("the moved domain's old host still resolves")
	}
	if id, ok := byHost(t, d, "moved.test"); !ok || id != 77 || d.Len() != 5000 {
		t.Errorf("moved.test → %d, %v, Len %d", id, ok, d.Len())
	}
	for _, i := range []int{1, 76, 78, 5000} {
		if id, ok := byHost(t, d, fmt.Sprintf("d%d.test", i)); !ok || id != link.DomainID(i) {
			t.Errorf("d%d.test → %d, %v after another domain moved", i, id, ok)
		}
	}
}

// Two active domains on one host (a moment's state between changes applied
// out of order): the later change holds it, and when that domain moves
// away the other one still on the host has it.
func TestDomainsHostClaimedTwice(t *testing.T) {
	d := NewDomains(testKeys(t))
	must(t, d.Replace([]link.Domain{domainConf(5, "x.test", 10), domainConf(6, "x.test", 12)}))
	if id, ok := byHost(t, d, "x.test"); !ok || id != 6 {
		t.Fatalf("x.test → %d, %v; want the later change's domain 6", id, ok)
	}
	must(t, d.Apply(domainConf(6, "y.test", 13)))
	if id, ok := byHost(t, d, "x.test"); !ok || id != 5 {
		t.Errorf("after domain 6 moved: x.test → %d, %v; want domain 5", id, ok)
	}
	if id, ok := byHost(t, d, "y.test"); !ok || id != 6 {
		t.Errorf("y.test → %d, %v; want 6", id, ok)
	}
}

// BenchmarkDomainsByHost is the request path's host lookup: the Host
// header's canonical key into a stack buffer, then the table, among 1,000
// domains.
func BenchmarkDomainsByHost(b *testing.B) {
	d := NewDomains(testKeys(b))
	confs := make([]link.Domain, 1000)
	hosts := make([][]byte, len(confs))
	for i := range confs {
		confs[i] = domainConf(link.DomainID(i+1), fmt.Sprintf("go.tenant-%d.example", i), 1)
		hosts[i] = []byte(fmt.Sprintf("Go.Tenant-%d.example:443", i))
	}
	must(b, d.Replace(confs))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var buf [253]byte
		key, _ := link.AppendHostKey(buf[:0], hosts[i%len(hosts)])
		if _, ok := d.ByHost(key); !ok {
			b.Fatal("miss")
		}
		i += 7
	}
}
