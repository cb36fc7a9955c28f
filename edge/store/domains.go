package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
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
	// order, then one per other key of the edge's key file (a rotation
	// the edge has not applied yet may already be in use: see state);
	// nil on a sequential domain, and nil when Undecodable.
	Codes []*ff1.Codes
	// Undecodable marks an FF1 domain naming a key the edge's key file
	// lacks (or none at all): the edge cannot turn its codes into IDs, so
	// it rules none of them out from memory and asks the authority.
	Undecodable bool

	shard int // of Conf.Host, in the table's host index
}

// platformState stands for the platform's domain until a table names it:
// sequential codes, the only kind that existed before domains.
var platformState = &DomainState{Conf: link.Domain{
	ID: link.DefaultDomain, CodeMode: link.CodesSequential, Status: link.DomainActive,
}}

// Domains is the edge's domain table: host → domain, from the snapshot's
// table (Replace) and the stream's domain events (Apply), newer version
// winning per domain. Reads take no lock and do not allocate: the table is
// immutable behind an atomic pointer. A write copies only the shards it
// touches (of 64, by domain number and by host), so applying a domain
// costs about 1/64 of the table, and replaying many domain events from
// the stream's start does not cost the square of their number. Safe for
// concurrent use.
type Domains struct {
	keys *ff1.Keys
	seed maphash.Seed // host shards

	mu  sync.Mutex // writers
	cur atomic.Pointer[domainTable]

	// Refused counts configurations Apply and Replace refused as invalid.
	Refused atomic.Int64
}

const domainShards = 64

type domainTable struct {
	byID [domainShards]map[link.DomainID]*DomainState // by number; removed domains too
	// members are the active domains by the shard of their host, all of
	// them, so a host whose holder leaves is given to another active
	// domain on it, if any, from its shard alone.
	members [domainShards]map[link.DomainID]*DomainState
	// byHost holds the active domains only: a removed domain's host, or
	// the old host of a domain that moved, resolves to nothing.
	byHost      [domainShards]map[string]*DomainState
	undecodable [domainShards]int // active undecodable hosts per shard
	known       bool
	n           int
}

// NewDomains returns an empty table whose FF1 domains decode with keys (nil:
// no keys, every FF1 domain Undecodable).
func NewDomains(keys *ff1.Keys) *Domains {
	if keys == nil {
		keys = &ff1.Keys{}
	}
	d := &Domains{keys: keys, seed: maphash.MakeSeed()}
	d.cur.Store(&domainTable{})
	return d
}

func (d *Domains) hostShard(host []byte) int { return int(maphash.Bytes(d.seed, host) % domainShards) }

func idShard(id link.DomainID) int { return int(id % domainShards) }

// ByHost returns the active domain whose canonical host is key (what
// link.AppendHostKey or link.CanonicalHost give). It does not allocate.
func (d *Domains) ByHost(key []byte) (*DomainState, bool) {
	s, ok := d.cur.Load().byHost[d.hostShard(key)][string(key)]
	return s, ok
}

// Get returns domain id's state, a removed domain's too (Conf.Status says
// so). The platform's domain is always there: until a table names it, as
// a sequential domain without a host.
func (d *Domains) Get(id link.DomainID) (*DomainState, bool) {
	s, ok := d.cur.Load().byID[idShard(id)][id]
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
func (d *Domains) Undecodable() int {
	t, n := d.cur.Load(), 0
	for _, u := range t.undecodable {
		n += u
	}
	return n
}

// Len is the number of domains held, removed ones included.
func (d *Domains) Len() int { return d.cur.Load().n }

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
	w := d.edit()
	w.put(c)
	w.publish(w.t.known || c.ID == link.DefaultDomain)
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
	w := d.edit()
	for _, c := range confs {
		if err := checkDomain(c); err != nil {
			d.Refused.Add(1)
			if first == nil {
				first = err
			}
			continue
		}
		w.put(c)
	}
	w.publish(true)
	return first
}

// tableEdit is a write in progress: a copy of the table in service whose
// touched shards are copies too. Used under d.mu.
type tableEdit struct {
	d                  *Domains
	t                  *domainTable
	ids, hosts, member [domainShards]bool // shards copied
}

func (d *Domains) edit() *tableEdit {
	t := *d.cur.Load()
	return &tableEdit{d: d, t: &t}
}

// put stores c unless its domain is held at a newer or equal version.
func (w *tableEdit) put(c link.Domain) {
	si := idShard(c.ID)
	old, had := w.t.byID[si][c.ID]
	if had && old.Conf.Version >= c.Version {
		return
	}
	if !w.ids[si] {
		w.t.byID[si], w.ids[si] = maps.Clone(w.t.byID[si]), true
		if w.t.byID[si] == nil {
			w.t.byID[si] = map[link.DomainID]*DomainState{}
		}
	}
	s := w.d.state(c)
	w.t.byID[si][c.ID] = s
	if !had {
		w.t.n++
	}
	if had && old.Conf.Status != link.DomainRemoved {
		w.memberOf(old.shard)
		delete(w.t.members[old.shard], c.ID)
	}
	if s.Conf.Status != link.DomainRemoved {
		w.memberOf(s.shard)
		w.t.members[s.shard][c.ID] = s
	}
}

func (w *tableEdit) memberOf(hs int) {
	if w.member[hs] {
		return
	}
	w.t.members[hs], w.member[hs] = maps.Clone(w.t.members[hs]), true
	if w.t.members[hs] == nil {
		w.t.members[hs] = map[link.DomainID]*DomainState{}
	}
}

// publish rebuilds the host index of each host shard whose members
// changed and puts the table in service.
func (w *tableEdit) publish(known bool) {
	for hs, touched := range w.member {
		if !touched {
			continue
		}
		m := make(map[string]*DomainState, len(w.t.members[hs]))
		undecodable := 0
		for _, s := range w.t.members[hs] {
			// Two active domains on one host can only be a moment's state
			// between two changes applied out of order (a snapshot and
			// the stream): the later change holds the host, the higher
			// number on a tie.
			if o, ok := m[s.Conf.Host]; ok && (o.Conf.Version > s.Conf.Version ||
				o.Conf.Version == s.Conf.Version && o.Conf.ID > s.Conf.ID) {
				continue
			}
			m[s.Conf.Host] = s
		}
		for _, s := range m {
			if s.Undecodable {
				undecodable++
			}
		}
		w.t.byHost[hs], w.t.undecodable[hs] = m, undecodable
	}
	w.t.known = known
	w.d.cur.Store(w.t)
}

// state builds c's state, with its decoders.
func (d *Domains) state(c link.Domain) *DomainState {
	c.KeyIDs = append([]string(nil), c.KeyIDs...) // the caller's slice stays the caller's
	s := &DomainState{Conf: c, shard: d.hostShard([]byte(c.Host))}
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
	// Then every other key of the edge's file. A rotation names a key the
	// operator added to every edge's file first (docs/codes.md); control
	// encodes with it as soon as the rotation commits, and this edge may
	// not have applied the domain's change yet. A code made with it then
	// decodes, under the domain's old keys, to an unrelated ID that could
	// look sealed or beyond the frontier: ruling a miss out under the
	// file's other keys too keeps that from becoming a 404. It costs a miss
	// one decode per key, never a hit.
	for _, name := range d.keys.Names() {
		if slices.Contains(c.KeyIDs, name) {
			continue
		}
		if cd, err := d.keys.Codes(name, c.Host); err == nil {
			codes = append(codes, cd)
		}
	}
	s.Codes = codes
	return s
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
