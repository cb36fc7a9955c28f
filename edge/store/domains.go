package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// DomainState is one domain as the edge serves it: its configuration and
// what the edge needs to rule a code out locally. Immutable once published.
type DomainState struct {
	Conf link.Domain
	// Codes are the decoders of an FF1 domain, one per Conf.KeyIDs in
	// order; nil on a sequential domain, and nil when Undecodable.
	Codes []*ff1.Codes
	// Undecodable marks an FF1 domain naming a key the edge's key file
	// lacks (or none at all): the edge cannot turn its codes into IDs, so
	// it rules none of them out from memory and asks the authority.
	Undecodable bool
}

// platformState stands for the platform's domain until a table names it:
// sequential codes, the only kind that existed before domains.
var platformState = &DomainState{Conf: link.Domain{
	ID: link.DefaultDomain, CodeMode: link.CodesSequential, Status: link.DomainActive,
}}

// Domains is the edge's domain table: host → domain, from the snapshot's
// table (Replace) and the stream's domain events (Apply), newer version
// winning per domain. Reads take no lock and do not allocate: the table is
// an immutable map behind an atomic pointer, copied whole on each write
// (domains change rarely and are few next to links). Safe for concurrent
// use.
type Domains struct {
	keys *ff1.Keys

	mu  sync.Mutex // writers
	cur atomic.Pointer[domainTable]

	// Refused counts configurations Apply and Replace refused as invalid.
	Refused atomic.Int64
}

type domainTable struct {
	byID map[link.DomainID]*DomainState // removed domains too
	// byHost holds the active domains only: a removed domain's host, or
	// the old host of a domain that moved, resolves to nothing.
	byHost      map[string]*DomainState
	known       bool
	undecodable int
}

// NewDomains returns an empty table whose FF1 domains decode with keys (nil:
// no keys, every FF1 domain Undecodable).
func NewDomains(keys *ff1.Keys) *Domains {
	if keys == nil {
		keys = &ff1.Keys{}
	}
	d := &Domains{keys: keys}
	d.cur.Store(&domainTable{byID: map[link.DomainID]*DomainState{}, byHost: map[string]*DomainState{}})
	return d
}

// ByHost returns the active domain whose canonical host is key (what
// link.AppendHostKey or link.CanonicalHost give). It does not allocate.
func (d *Domains) ByHost(key []byte) (*DomainState, bool) {
	s, ok := d.cur.Load().byHost[string(key)]
	return s, ok
}

// Get returns domain id's state, a removed domain's too (Conf.Status says
// so). The platform's domain is always there: until a table names it, as
// a sequential domain without a host.
func (d *Domains) Get(id link.DomainID) (*DomainState, bool) {
	s, ok := d.cur.Load().byID[id]
	if !ok && id == link.DefaultDomain {
		return platformState, true
	}
	return s, ok
}

// Known reports whether the edge has received a domain table: from a
// snapshot that carries one (Replace), or the platform domain's
// configuration from the stream. Until then the edge serves every host as
// the platform's domain, as it did before domains existed (an edge of a
// control that predates them); a tenant's domain applied before that does
// not count, since without the platform's host the table cannot tell the
// platform's requests from unknown hosts.
func (d *Domains) Known() bool { return d.cur.Load().known }

// Undecodable is how many active FF1 domains the edge cannot decode for a
// key its file lacks: each costs the authority a round trip per miss.
func (d *Domains) Undecodable() int { return d.cur.Load().undecodable }

// Len is the number of domains held, removed ones included.
func (d *Domains) Len() int { return len(d.cur.Load().byID) }

// Apply takes c, a domain's whole configuration, unless the table holds
// the domain at a newer or equal version. An invalid configuration is
// refused with an error and changes nothing.
func (d *Domains) Apply(c link.Domain) error {
	if err := checkDomain(c); err != nil {
		d.Refused.Add(1)
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.cur.Load()
	if old, ok := t.byID[c.ID]; ok && old.Conf.Version >= c.Version {
		return nil
	}
	byID := cloneStates(t.byID, 1)
	byID[c.ID] = d.state(c)
	d.publish(byID, t.known || c.ID == link.DefaultDomain)
	return nil
}

// Replace takes a snapshot's domain table, keeping the domains the table
// holds at a newer version (applied from the stream after the snapshot was
// built) and those the snapshot lacks (domains are never deleted, so they
// are newer than it). nil, a snapshot without a table, changes nothing.
// Invalid configurations are skipped, the first one's error returned.
func (d *Domains) Replace(confs []link.Domain) error {
	if confs == nil {
		return nil
	}
	var first error
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.cur.Load()
	byID := cloneStates(t.byID, len(confs))
	for _, c := range confs {
		if err := checkDomain(c); err != nil {
			d.Refused.Add(1)
			if first == nil {
				first = err
			}
			continue
		}
		if old, ok := byID[c.ID]; ok && old.Conf.Version >= c.Version {
			continue
		}
		byID[c.ID] = d.state(c)
	}
	d.publish(byID, true)
	return first
}

// publish builds the host index of byID and puts the table in service.
// Called under d.mu.
func (d *Domains) publish(byID map[link.DomainID]*DomainState, known bool) {
	t := &domainTable{byID: byID, byHost: make(map[string]*DomainState, len(byID)), known: known}
	for _, s := range byID {
		if s.Conf.Status == link.DomainRemoved {
			continue
		}
		// Two active domains on one host can only be a moment's state
		// between two changes of a table applied out of order (a snapshot
		// and the stream): the later change holds the host.
		if o, ok := t.byHost[s.Conf.Host]; ok && o.Conf.Version > s.Conf.Version {
			continue
		}
		t.byHost[s.Conf.Host] = s
	}
	for _, s := range t.byHost {
		if s.Undecodable {
			t.undecodable++
		}
	}
	d.cur.Store(t)
}

// state builds c's state, with its decoders.
func (d *Domains) state(c link.Domain) *DomainState {
	c.KeyIDs = append([]string(nil), c.KeyIDs...) // the caller's slice stays the caller's
	s := &DomainState{Conf: c}
	if c.CodeMode != link.CodesFF1 {
		return s
	}
	if len(c.KeyIDs) == 0 {
		s.Undecodable = true
		return s
	}
	codes := make([]*ff1.Codes, 0, len(c.KeyIDs))
	for _, name := range c.KeyIDs {
		cd, err := d.keys.Codes(name, c.Host)
		if err != nil {
			// ErrNoKey, or a host ff1 refuses as a tweak: either way no
			// code of the domain can be ruled out from memory.
			s.Undecodable = true
			return s
		}
		codes = append(codes, cd)
	}
	s.Codes = codes
	return s
}

func cloneStates(m map[link.DomainID]*DomainState, extra int) map[link.DomainID]*DomainState {
	c := make(map[link.DomainID]*DomainState, len(m)+extra)
	for k, v := range m {
		c[k] = v
	}
	return c
}

var errDomainConf = errors.New("invalid domain configuration")

// checkDomain refuses a configuration the table cannot serve by.
func checkDomain(c link.Domain) error {
	if c.ID > link.MaxDomainID {
		return fmt.Errorf("%w: domain %d: number out of range", errDomainConf, c.ID)
	}
	if h, err := link.CanonicalHost(c.Host); err != nil || h != c.Host {
		return fmt.Errorf("%w: domain %d: host is not canonical", errDomainConf, c.ID)
	}
	if !c.CodeMode.Valid() {
		return fmt.Errorf("%w: domain %d: code mode %q", errDomainConf, c.ID, c.CodeMode)
	}
	if c.Status != link.DomainActive && c.Status != link.DomainRemoved {
		return fmt.Errorf("%w: domain %d: status %q", errDomainConf, c.ID, c.Status)
	}
	return nil
}
