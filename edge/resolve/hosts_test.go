package resolve

import (
	"errors"
	"testing"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

type hostAnswer struct {
	d   link.Domain
	ok  bool
	err error
}

func (a hostAnswer) AskHost(string) (link.Domain, bool, error) { return a.d, a.ok, a.err }

// TestHostsResolve: a domain the authority knows is applied and served;
// not known is NotFound; an error, a domain of another host or one the
// table refuses is Unavailable, never NotFound.
func TestHostsResolve(t *testing.T) {
	good := link.Domain{ID: 9, Host: "new.acme.com", TenantID: 7, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 4}
	other := good
	other.Host = "victim.example"
	bad := good
	bad.CodeMode = "rot13"
	for _, tc := range []struct {
		name string
		a    hostAnswer
		want Outcome
	}{
		{"found", hostAnswer{d: good, ok: true}, Found},
		{"not found", hostAnswer{}, NotFound},
		{"error", hostAnswer{err: errors.New("down")}, Unavailable},
		{"another host's domain", hostAnswer{d: other, ok: true}, Unavailable},
		{"refused by the table", hostAnswer{d: bad, ok: true}, Unavailable},
	} {
		ds := store.NewDomains(nil)
		if err := ds.Replace([]link.Domain{{ID: 0, Host: "sho.rt", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1}}); err != nil {
			t.Fatal(err)
		}
		h := &Hosts{Domains: ds, Authority: tc.a}
		st, got := h.Resolve("new.acme.com")
		if got != tc.want {
			t.Errorf("%s: outcome %d; want %d", tc.name, got, tc.want)
		}
		_, inTable := ds.ByHost([]byte("new.acme.com"))
		if (got == Found) != (st != nil) || (got == Found) != inTable {
			t.Errorf("%s: state %+v, in the table %v", tc.name, st, inTable)
		}
		if _, ok := ds.ByHost([]byte("victim.example")); ok {
			t.Errorf("%s: another host was taken into the table", tc.name)
		}
	}
}
