package redirect

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/edgelink/edgelink/shared/link"
)

// ClickLimits is an edge's own account of the links with a click limit
// that it redirects (docs/click-limits.md). A limited link's extras carry
// its limit N and C, the clicks the rollups had counted of it when control
// wrote them. A link whose C has reached N is answered 410 (the change the
// click roller writes when it counts the Nth click says so). Before that
// change arrives, the edge spends an allowance of its own: from the first
// extras it sees with limit N it may redirect N − C more times, and a
// later change of the link with the same N and a larger C lowers what is
// left to N − C if that is less. A new N (the creator raised or lowered
// the limit) starts the allowance over from that change's N − C.
//
// Why this is sound and what it bounds: the C clicks were all served
// before the extras carrying C were read, so when this edge has served
// N − C after seeing them, at least N clicks have been served in all: the
// allowance never stops a link before its limit. And every count an edge
// sees of limit N was read after the limit was set, when C0 clicks were
// counted, so an edge process serves at most N − C0 redirects of the link
// once it knows the limit. With E edge processes serving the link, at most
// N + (E − 1)·(N − C0) + I clicks are ever served, I being the clicks
// served before an edge learned the limit that C0 did not count (none for
// a link created with its limit: no edge serves it before it exists). The
// roller's change usually stops every edge well before that: as soon as
// the Nth click is counted and the change has reached the edges.
//
// Edges also tell each other what they served (Collect and Peer, which
// edge/limitshare carries over NATS off the response path): each reports,
// per limited link, the count C it started from and the redirects L it
// served since. An edge stops a link, too, once the smallest C reported
// (its own among them) plus every edge's L reaches N. That is a sound
// lower bound of the clicks served: a click one edge counts in its L was
// served after that edge read its C, so a count holding it was read later
// and is larger than that C, never the smallest. It stops a link within
// about a report's interval of its Nth click instead of the time a click
// takes to be counted; without the reports (NATS down) the allowance alone
// bounds it as above.
//
// The account is kept in memory only: a restarted edge process starts
// over from the count its snapshot, the stream or the authority gives it,
// as the bound's E says. It remembers at most MaxLimited links, in two
// generations (a link forgotten starts over the same way). The zero value
// is ready; it is safe for concurrent use.
type ClickLimits struct {
	shards [limitShards]limitShard
	// Reached counts 410s of links whose counted clicks had reached their
	// limit; Spent counts 410s of links whose allowance on this edge ran
	// out before the change saying they reached it arrived; Shared counts
	// 410s of links the edges' reports, added up, showed at their limit
	// first.
	Reached, Spent, Shared atomic.Uint64

	max int // links remembered at most; 0: MaxLimited (tests set less)
}

// MaxLimited bounds the limited links a ClickLimits remembers.
const MaxLimited = 1 << 20

const limitShards = 64

type limitShard struct {
	mu       sync.Mutex
	cur, old map[string]*allowance // by domain (4 bytes) and code
}

// allowance is what is left of one link's limit on this edge, and what
// the edges reported of it.
type allowance struct {
	max, left int64 // 0, 0: this edge has not redirected the link yet
	// base is the count this edge first saw of limit max, served its
	// redirects since; dirty says served changed since the last Collect.
	base, served int64
	dirty        bool
	// peers are the other edges' last reports; peerBase and peerServed
	// sum up those of limit max (peerBase: their least base, -1: none).
	peers                []peerCount
	peerBase, peerServed int64
}

// peerCount is one edge process's last report of a link.
type peerCount struct {
	from              string
	max, base, served int64
}

// maxPeers bounds the reports kept per link: edge processes, restarts
// included (a restarted edge reports under a new name).
const maxPeers = 64

// Allow takes one redirect of the link of code on d, whose extras are
// extras, from its allowance, and reports whether the edge may redirect:
// false when its counted clicks have reached its limit or the edge has
// spent what its limit left. A link without a limit is always allowed and
// costs a length check and a flags read; one with a limit takes a shard's
// lock. It does not allocate, except the first time it sees a limit of a
// link (one entry).
func (c *ClickLimits) Allow(d link.DomainID, code, extras []byte) bool {
	if len(extras) == 0 {
		return true
	}
	v := link.ViewExtras(extras)
	max := v.MaxClicks()
	if max == 0 {
		return true
	}
	if v.LimitReached() {
		c.Reached.Add(1)
		return false
	}
	left := max - v.ClicksCounted()
	var buf [4 + link.MaxCodeLen]byte
	binary.BigEndian.PutUint32(buf[:4], uint32(d))
	key := buf[:4+copy(buf[4:], code)]
	s := &c.shards[shardOf(key)]
	s.mu.Lock()
	a := s.find(key, c.generation())
	if a == nil {
		a = &allowance{peerBase: -1}
		s.add(key, a, c.generation())
	}
	switch {
	case a.max != max:
		a.max, a.left, a.base, a.served, a.dirty = max, left, max-left, 0, false
		a.sumPeers()
	case left < a.left:
		a.left = left
	}
	var refused *atomic.Uint64
	switch {
	case a.left <= 0:
		refused = &c.Spent
	case a.peerBase >= 0 && min(a.base, a.peerBase)+a.served+a.peerServed >= max:
		refused = &c.Shared
	default:
		a.left--
		a.served++
		a.dirty = true
	}
	s.mu.Unlock()
	if refused != nil {
		refused.Add(1)
		return false
	}
	return true
}

// Collect calls emit with this edge's report of every limited link it
// redirected since the last Collect: the link, its limit, the count this
// edge started from and the redirects it served since. It holds one
// shard's lock at a time; emit must not call back.
func (c *ClickLimits) Collect(emit func(d link.DomainID, code []byte, max, base, served int64)) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, m := range [2]map[string]*allowance{s.cur, s.old} {
			for k, a := range m {
				if a.dirty {
					a.dirty = false
					emit(link.DomainID(binary.BigEndian.Uint32([]byte(k[:4]))), []byte(k[4:]), a.max, a.base, a.served)
				}
			}
		}
		s.mu.Unlock()
	}
}

// Peer takes another edge process's report (Collect's, from) of a link:
// it replaces that process's earlier one. Reports from more than
// maxPeers processes of one link keep the latest maxPeers.
func (c *ClickLimits) Peer(from string, d link.DomainID, code []byte, max, base, served int64) {
	if max <= 0 || base < 0 || served < 0 || len(code) > link.MaxCodeLen {
		return
	}
	var buf [4 + link.MaxCodeLen]byte
	binary.BigEndian.PutUint32(buf[:4], uint32(d))
	key := buf[:4+copy(buf[4:], code)]
	s := &c.shards[shardOf(key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.find(key, c.generation())
	if a == nil {
		a = &allowance{peerBase: -1}
		s.add(key, a, c.generation())
	}
	i := slices.IndexFunc(a.peers, func(p peerCount) bool { return p.from == from })
	switch {
	case i >= 0:
		a.peers = append(a.peers[:i], a.peers[i+1:]...)
	case len(a.peers) == maxPeers:
		a.peers = a.peers[1:]
	}
	a.peers = append(a.peers, peerCount{from: from, max: max, base: base, served: served})
	a.sumPeers()
}

// sumPeers adds up the reports of limit a.max.
func (a *allowance) sumPeers() {
	a.peerBase, a.peerServed = -1, 0
	for _, p := range a.peers {
		if p.max != a.max {
			continue
		}
		if a.peerBase < 0 || p.base < a.peerBase {
			a.peerBase = p.base
		}
		a.peerServed += p.served
	}
}

// Reaches reports whether extras say a limit has been reached, without
// touching any account: for answering 410 before anything else of the
// link (its password form).
func Reaches(extras []byte) bool {
	if len(extras) == 0 {
		return false
	}
	v := link.ViewExtras(extras)
	return v.LimitReached()
}

// limitReached reports whether extras say the link's counted clicks
// reached its limit, counting it in Limits.Reached.
func (h *Handler) limitReached(extras []byte) bool {
	if !Reaches(extras) {
		return false
	}
	if h.Limits != nil {
		h.Limits.Reached.Add(1)
	}
	return true
}

// Remembered is how many links the account holds.
func (c *ClickLimits) Remembered() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.old)
		s.mu.Unlock()
	}
	return n
}

// generation is how many links a shard's newer generation holds at most.
func (c *ClickLimits) generation() int {
	n := c.max
	if n <= 0 {
		n = MaxLimited
	}
	return max(n/limitShards/2, 1)
}

// find looks key up, moving an entry of the older generation to the newer.
// The shard's lock is held.
func (s *limitShard) find(key []byte, gen int) *allowance {
	if a := s.cur[string(key)]; a != nil {
		return a
	}
	a := s.old[string(key)]
	if a != nil {
		delete(s.old, string(key))
		s.add(key, a, gen)
	}
	return a
}

// add puts a in the newer generation, which becomes the older one when it
// holds gen links: the older one is forgotten then.
func (s *limitShard) add(key []byte, a *allowance, gen int) {
	if s.cur == nil {
		s.cur = make(map[string]*allowance)
	}
	if len(s.cur) >= gen {
		s.old, s.cur = s.cur, make(map[string]*allowance)
	}
	s.cur[string(key)] = a
}

// shardOf spreads keys over the shards (FNV-1a).
func shardOf(key []byte) int {
	h := uint32(2166136261)
	for _, b := range key {
		h = (h ^ uint32(b)) * 16777619
	}
	return int(h % limitShards)
}
