package responder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/authority"
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
}

func (l *routeLookup) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	l.calls++
	if l.slow[code] {
		<-ctx.Done()
		return authority.Reply{}, ctx.Err()
	}
	if l.fail {
		return authority.Reply{}, errors.New("connection refused")
	}
	if l.found[code] {
		return authority.Reply{Kind: authority.Found, Code: code, Version: 7}, nil
	}
	return authority.Reply{Kind: authority.NotFound, Version: 9}, nil
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
