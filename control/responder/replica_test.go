package responder

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// routeLookup answers from a table; a code listed in slow blocks until the
// context ends. Fakes stand in for the databases here only to pin the
// routing rules cheaply; gate/replication runs them on a real lagging
// replica.
type routeLookup struct {
	found map[string]bool
	slow  map[string]bool
	fail  bool
	calls int
	asked []string
	// domains are the hosts LookupKeys finds; hostsAsked those asked.
	domains    map[string]link.DomainID
	hostsAsked []string
}

// key names a code in routeLookup's tables: the code on the platform's
// domain, "<domain>/<code>" on another.
func key(d link.DomainID, code string) string {
	if d == link.DefaultDomain {
		return code
	}
	return fmt.Sprintf("%d/%s", d, code)
}

func (l *routeLookup) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	l.calls++
	return l.answer(ctx, link.DefaultDomain, code)
}

func (l *routeLookup) answer(ctx context.Context, d link.DomainID, code string) (authority.Reply, error) {
	if l.slow[key(d, code)] {
		<-ctx.Done()
		return authority.Reply{}, ctx.Err()
	}
	if l.fail {
		return authority.Reply{}, errors.New("connection refused")
	}
	if l.found[key(d, code)] {
		return authority.Reply{Kind: authority.Found, Domain: d, Code: code, Version: 7}, nil
	}
	return authority.Reply{Kind: authority.NotFound, Version: 9}, nil
}

// LookupCodes answers each code as LookupForEdge would on its domain,
// failing as a whole when any code fails; asked records the keys it was
// asked.
func (l *routeLookup) LookupCodes(ctx context.Context, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error) {
	l.calls++
	out := make([]authority.Reply, len(codes))
	for i, c := range codes {
		d := link.DefaultDomain
		if len(domains) > 0 {
			d = domains[i]
		}
		l.asked = append(l.asked, key(d, c))
		r, err := l.answer(ctx, d, c)
		if err != nil {
			return nil, 0, err
		}
		if r.Kind == authority.NotFound {
			r.Version = 0 // a question's NotFound carries no version of its own
		}
		out[i] = r
	}
	return out, 9, nil
}

// TestReplicaFirstCodes: in a question, the codes the replica has are its
// answers; only the others are asked of the primary, and all of them when
// the replica fails.
func TestReplicaFirstCodes(t *testing.T) {
	replica := &routeLookup{found: map[string]bool{"00000A": true}}
	primary := &routeLookup{found: map[string]bool{"00000A": true, "00000B": true}}
	rf := &ReplicaFirst{Replica: replica, Primary: primary}
	got, _, err := rf.LookupCodes(context.Background(), nil, []string{"00000A", "00000B", "00000C"})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []authority.Kind{got[0].Kind, got[1].Kind, got[2].Kind}
	if kinds[0] != authority.Found || kinds[1] != authority.Found || kinds[2] != authority.NotFound || got[1].Code != "00000B" {
		t.Fatalf("answers %+v; want Found, Found (from the primary), NotFound", got)
	}
	if len(primary.asked) != 2 || primary.asked[0] != "00000B" || primary.asked[1] != "00000C" {
		t.Errorf("the primary was asked %q; want only what the replica lacked", primary.asked)
	}
	if rf.Fallbacks.Load() != 1 || rf.FromReplica.Load() != 1 || rf.FromPrimary.Load() != 2 {
		t.Errorf("counters: fallbacks %d, from replica %d, from primary %d; want 1, 1, 2",
			rf.Fallbacks.Load(), rf.FromReplica.Load(), rf.FromPrimary.Load())
	}
	down := &ReplicaFirst{Replica: &routeLookup{fail: true}, Primary: &routeLookup{found: map[string]bool{"00000A": true}}}
	got, _, err = down.LookupCodes(context.Background(), nil, []string{"00000A", "00000C"})
	if err != nil || got[0].Kind != authority.Found || got[1].Kind != authority.NotFound {
		t.Fatalf("replica down: %+v, %v; want the primary's answers", got, err)
	}
	both := &ReplicaFirst{Replica: &routeLookup{fail: true}, Primary: &routeLookup{fail: true}}
	if _, _, err := both.LookupCodes(context.Background(), nil, []string{"00000A"}); err == nil {
		t.Fatal("both down: no error; want one (the edge answers 503)")
	}
}

// TestReplicaFirstDomains: the primary is asked about what the replica
// lacked on the domains asked, never on the platform's in their place.
func TestReplicaFirstDomains(t *testing.T) {
	replica := &routeLookup{found: map[string]bool{"3/00000A": true}}
	primary := &routeLookup{found: map[string]bool{"3/00000A": true, "00000B": true, "4/00000B": true}}
	rf := &ReplicaFirst{Replica: replica, Primary: primary}
	got, _, err := rf.LookupCodes(context.Background(), []link.DomainID{3, 4, 0, 3}, []string{"00000A", "00000B", "00000B", "00000B"})
	if err != nil {
		t.Fatal(err)
	}
	want := []authority.Reply{
		{Kind: authority.Found, Domain: 3, Code: "00000A", Version: 7},
		{Kind: authority.Found, Domain: 4, Code: "00000B", Version: 7},
		{Kind: authority.Found, Code: "00000B", Version: 7},
		{Kind: authority.NotFound},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if fmt.Sprint(primary.asked) != "[4/00000B 00000B 3/00000B]" {
		t.Errorf("the primary was asked %q; want what the replica lacked, on its domains", primary.asked)
	}
}

func TestReplicaFirstRouting(t *testing.T) {
	tests := []struct {
		name         string
		replica      *routeLookup
		primaryHas   bool
		want         authority.Kind
		wantFallback bool // found by the primary after the replica answered NotFound
		wantFailed   bool // the replica erred or timed out
	}{
		{"replica has it", &routeLookup{found: map[string]bool{"00000A": true}}, true, authority.Found, false, false},
		{"replica lags", &routeLookup{}, true, authority.Found, true, false},
		{"unknown everywhere", &routeLookup{}, false, authority.NotFound, false, false},
		{"replica down", &routeLookup{fail: true}, true, authority.Found, false, true},
		{"replica slow", &routeLookup{slow: map[string]bool{"00000A": true}}, true, authority.Found, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary := &routeLookup{found: map[string]bool{"00000A": tt.primaryHas}}
			rf := &ReplicaFirst{Replica: tt.replica, Primary: primary, ReplicaTimeout: 20 * time.Millisecond}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := rf.LookupForEdge(ctx, "00000A")
			if err != nil || rep.Kind != tt.want {
				t.Fatalf("LookupForEdge = %+v, %v; want kind %v", rep, err, tt.want)
			}
			if rep.Kind == authority.NotFound && primary.calls == 0 {
				t.Errorf("NotFound answered without asking the primary")
			}
			if got := rf.Fallbacks.Load() == 1; got != tt.wantFallback {
				t.Errorf("fallbacks %d, want fallback %v", rf.Fallbacks.Load(), tt.wantFallback)
			}
			if got := rf.ReplicaFailed.Load() == 1; got != tt.wantFailed {
				t.Errorf("replica failures %d, want failed %v", rf.ReplicaFailed.Load(), tt.wantFailed)
			}
		})
	}
	t.Run("both down", func(t *testing.T) {
		rf := &ReplicaFirst{Replica: &routeLookup{fail: true}, Primary: &routeLookup{fail: true}}
		if rep, err := rf.LookupForEdge(context.Background(), "00000A"); err == nil {
			t.Fatalf("LookupForEdge with both down = %+v; want an error (the edge answers Unavailable)", rep)
		}
	})
}

// LookupKeys answers codes as LookupCodes; hostsAsked records the hosts,
// and every host in domains is found.
func (l *routeLookup) LookupKeys(ctx context.Context, domains []link.DomainID, codes, hosts []string) ([]authority.Reply, []link.Domain, uint64, error) {
	reps, v, err := l.LookupCodes(ctx, domains, codes)
	if err != nil {
		return nil, nil, 0, err
	}
	var found []link.Domain
	for _, h := range hosts {
		l.hostsAsked = append(l.hostsAsked, h)
		if id, ok := l.domains[h]; ok {
			found = append(found, link.Domain{ID: id, Host: h, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 3})
		}
	}
	return reps, found, v, nil
}

// TestReplicaFirstHosts: a question with hosts goes to the primary whole,
// codes with it: a replica behind it lacks the domain created a moment
// ago, and its miss proves nothing.
func TestReplicaFirstHosts(t *testing.T) {
	replica := &routeLookup{found: map[string]bool{"3/00000A": true}}
	primary := &routeLookup{found: map[string]bool{"3/00000A": true}, domains: map[string]link.DomainID{"go.acme.com": 3}}
	rf := &ReplicaFirst{Replica: replica, Primary: primary}
	reps, found, _, err := rf.LookupKeys(context.Background(), []link.DomainID{3}, []string{"00000A"}, []string{"go.acme.com", "nobody.example"})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0].Kind != authority.Found || len(found) != 1 || found[0].ID != 3 {
		t.Fatalf("answers %+v, domains %+v; want the link and go.acme.com's domain", reps, found)
	}
	if replica.calls != 0 || len(primary.hostsAsked) != 2 {
		t.Errorf("replica asked %d times, primary asked hosts %q; want the primary only", replica.calls, primary.hostsAsked)
	}
	// Without hosts it is LookupCodes: the replica first.
	if _, found, _, err := rf.LookupKeys(context.Background(), []link.DomainID{3}, []string{"00000A"}, nil); err != nil || found != nil || replica.calls != 1 {
		t.Errorf("codes only: domains %+v, %v, replica calls %d; want the replica asked", found, err, replica.calls)
	}
	down := &ReplicaFirst{Replica: replica, Primary: &routeLookup{fail: true}}
	if _, _, _, err := down.LookupKeys(context.Background(), nil, []string{"00000A"}, []string{"go.acme.com"}); err == nil {
		t.Error("primary down: no error; want one (the edge answers 503)")
	}
}
