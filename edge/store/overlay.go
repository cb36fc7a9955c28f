package store

import (
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// Overlay holds the changes applied from the stream since the snapshot,
// last writer wins per code by version. It is safe for concurrent use:
// lookups take no lock and do not allocate; writers (Apply, Prune) lock one
// of 64 shards at a time.
//
// Each shard appends records (record.go) to an arena of chunks it never
// rewrites, and indexes them with an open-addressing table of 8-byte slots
// (a 32-bit hash tag and the record's place), filled at most to 3/4. An
// update appends a new record and repoints its slot: the old record is
// garbage, and when a shard's garbage passes a quarter of its arena the
// writer copies the live records into fresh chunks and a fresh table
// (compaction). Readers keep reading what they loaded: a Record keeps its
// chunk alive, and nothing is reused in place. Chunks and large tables are
// mapped outside the Go heap (mem_mapped.go), so the garbage collector's
// pacing does not double what a bulk load costs.
type Overlay struct {
	seed   maphash.Seed
	mix    uint64 // seeds generated codes' hashes as seed does custom ones'
	shards [shardCount]shard
	// compactMin is the garbage, in bytes, below which a shard is not
	// compacted, whatever its share: copying a small arena gains little.
	compactMin int
}

const (
	shardBits  = 6
	shardCount = 1 << shardBits

	// A slot is the record's tag (the hash's high word, low bit forced to
	// 1 so a used slot is never 0) above its reference: chunk number (10
	// bits) and offset (22 bits). The hash's low word picks the home slot.
	offsetBits = 22
	maxChunks  = 1 << (32 - offsetBits)
	minChunk   = 16 << 10
	maxChunk   = 1 << offsetBits
	minSlots   = 16

	// maxOrigins bounds a shard's dictionary of target origins; further
	// targets are stored whole.
	maxOrigins = 1024
	// garbageShare: a shard whose arena is more than 1/garbageShare garbage
	// is compacted, so the records cost at most 4/3 of what is live.
	garbageShare = 4
)

type shard struct {
	idx atomic.Pointer[index]
	// origins is the dictionary of target origins, append-only and
	// published whole, so a reader indexes the one it loaded.
	origins atomic.Pointer[[]string]

	// Counters, written under mu and read by Stats.
	n, bytes, garbage, compactions, refused atomic.Int64

	mu       sync.Mutex // writers
	originOf map[string]uint32
}

// index is one table over one arena. Growing the table makes a new index
// over the same arena; compacting makes both anew. A table grows by half,
// not twice (which leaves it as little as 3/8 full, 21 bytes a link, where
// this leaves it 1/2 full, 16), so its size is any number, and a hash's
// home is its low word scaled to it.
type index struct {
	slots []uint64 // read and written atomically
	arena *arena
}

func (ix *index) home(h uint64) int { return int((h & 0xffffffff) * uint64(len(ix.slots)) >> 32) }

func (ix *index) next(i int) int {
	if i++; i == len(ix.slots) {
		return 0
	}
	return i
}

type arena struct {
	chunks atomic.Pointer[[]*chunk] // published whole as it grows
	// Written under the shard's lock only.
	tail, next int // bytes used of the last chunk; size of the next one
}

type chunk struct{ b []byte }

func newIndex(slots int, a *arena) *index {
	ix := &index{arena: a}
	ix.slots = blockWords(ix, slots)
	return ix
}

func newArena(firstChunk int) *arena {
	a := &arena{next: firstChunk}
	a.chunks.Store(new([]*chunk))
	return a
}

// NewOverlay returns an empty overlay.
func NewOverlay() *Overlay {
	o := &Overlay{seed: maphash.MakeSeed(), compactMin: 256 << 10}
	o.mix = maphash.Comparable(o.seed, 0)
	for i := range o.shards {
		sh := &o.shards[i]
		sh.idx.Store(newIndex(minSlots, newArena(minChunk)))
		sh.origins.Store(new([]string))
		sh.originOf = make(map[string]uint32)
	}
	return o
}

// hash of k: the shard is its top bits, the tag its high word, the home
// slot its low word.
func (o *Overlay) hash(k key) uint64 {
	if k.custom != nil {
		h := maphash.Bytes(o.seed, k.custom)
		if k.domain != 0 {
			// The same code on two domains must not share a home slot:
			// domains reuse the same short codes.
			h = mixID(h ^ uint64(k.domain))
		}
		return h
	}
	// A code's value is below 62^6 < 2^36 and a domain below 2^24, so
	// the two fit one word without overlapping.
	return mixID((k.id | uint64(k.domain)<<36) ^ o.mix)
}

// mixID is the splitmix64 finalizer: IDs are allocated in runs, and a
// table's slots and shards must not be.
func mixID(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func tagOf(h uint64) uint64 { return h>>32 | 1 }

func (k key) equal(r key) bool {
	if k.domain != r.domain {
		return false
	}
	if k.custom == nil {
		return r.custom == nil && k.id == r.id
	}
	return r.custom != nil && string(k.custom) == string(r.custom)
}

// recordAt is the record a slot refers to, the bytes from it to its
// chunk's end, and the chunk.
func (ix *index) recordAt(slot uint64) ([]byte, *chunk) {
	ref := uint32(slot)
	c := (*ix.arena.chunks.Load())[ref>>offsetBits]
	return c.b[ref&(maxChunk-1):], c
}

// find probes ix for k: the slot's position, the record's bytes, the end
// of its key and its chunk when k is held, else the empty position where
// it would go.
func (ix *index) find(k key, h uint64) (pos int, b []byte, next int, c *chunk, ok bool) {
	tag := tagOf(h)
	for i := ix.home(h); ; i = ix.next(i) {
		s := atomic.LoadUint64(&ix.slots[i])
		if s == 0 {
			// The slots may be mapped memory that ix owns: keep it
			// reachable past the last read of them.
			runtime.KeepAlive(ix)
			return i, nil, 0, nil, false
		}
		if s>>32 != tag {
			continue
		}
		b, c := ix.recordAt(s)
		if rk, next := recordKey(b); rk.equal(k) {
			runtime.KeepAlive(ix)
			return i, b, next, c, true
		}
	}
}

// Lookup returns the record of (d, code), if the overlay holds one. It
// does not allocate.
func (o *Overlay) Lookup(d link.DomainID, code []byte) (Record, bool) {
	var r Record
	ok := o.lookup(d, code, &r)
	return r, ok
}

// lookup is Lookup into r, which a hit overwrites: the hit path fills its
// answer in place instead of copying a Record through each layer.
func (o *Overlay) lookup(d link.DomainID, code []byte, r *Record) bool {
	if len(code) == 0 {
		return false
	}
	k := keyOf(d, code)
	h := o.hash(k)
	sh := &o.shards[h>>(64-shardBits)]
	_, b, next, c, ok := sh.idx.Load().find(k, h)
	if ok {
		readRecord(r, b, next, *sh.origins.Load(), c)
	}
	return ok
}

// Apply stores e unless the overlay already holds a newer or equal version
// of its (domain, code), reporting whether it did. Replays and duplicates are
// harmless. An entry the overlay cannot hold (a status that is not one of
// link's, an empty code or one longer than 255 bytes, extras that
// link.CheckExtras refuses, or a shard whose arena is at its limit of 4 GiB)
// is refused: Apply reports false and Stats counts it. e is copied; the
// caller may reuse it.
func (o *Overlay) Apply(e *Entry) bool {
	code := unsafe.Slice(unsafe.StringData(e.Code), len(e.Code))
	k := keyOf(e.Domain, code)
	st, ok := statusCode(e.Status)
	if !ok || len(code) == 0 || len(k.custom) > 255 || e.Domain > link.MaxDomainID || link.CheckExtras(e.Extras) != nil {
		o.shards[0].refused.Add(1)
		return false
	}
	h := o.hash(k)
	sh := &o.shards[h>>(64-shardBits)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ix := sh.idx.Load()
	pos, old, _, _, found := ix.find(k, h)
	if found && recordVersion(old) >= e.Version {
		return false
	}
	meta := st | redirectCode(e.RedirectType)<<2
	if e.Extras != "" {
		// Rare: the redirect goes into the more-flags byte (record.go).
		meta = st | metaMore<<2
	}
	if e.ExpiresAt != 0 {
		meta |= metaExpiry
	}
	if k.custom != nil {
		meta |= metaCustom
	}
	if k.domain != link.DefaultDomain {
		meta |= metaDomain
	}
	origin, rest := sh.origin(e.URL)
	n := recordLen(e, k, meta, origin, rest)
	ref, b, ok := ix.arena.alloc(n)
	if !ok {
		sh.refused.Add(1)
		return false
	}
	putRecord(b, e, k, meta, origin, rest)
	sh.bytes.Add(int64(n))
	slot := tagOf(h)<<32 | uint64(ref)
	if found {
		// The record is complete before the slot points at it: a reader
		// that loads the slot sees all of its bytes.
		atomic.StoreUint64(&ix.slots[pos], slot)
		sh.garbage.Add(int64(recordSize(old)))
		sh.maybeCompact(o)
		return true
	}
	if (sh.n.Load()+1)*4 > int64(len(ix.slots))*3 {
		ix = sh.rebuild(o, len(ix.slots)*3/2, ix.arena, nil)
		pos, _, _, _, _ = ix.find(k, h)
	}
	atomic.StoreUint64(&ix.slots[pos], slot)
	sh.n.Add(1)
	return true
}

// origin is url's origin in the dictionary (0 for none) and the rest of
// it, adding the origin when there is room. Called under sh.mu.
func (sh *shard) origin(url string) (uint32, string) {
	origin, rest := snapshot.SplitOrigin(url)
	if origin == "" {
		return 0, url
	}
	if i, ok := sh.originOf[origin]; ok {
		return i, rest
	}
	cur := *sh.origins.Load()
	if len(cur) >= maxOrigins {
		return 0, url
	}
	// A copy, or the dictionary would keep the whole URL's string. A new
	// slice, not an append in place: readers index the one they loaded,
	// and it is published before any record refers to the origin.
	origin = strings.Clone(origin)
	next := append(cur[:len(cur):len(cur)], origin)
	sh.origins.Store(&next)
	sh.originOf[origin] = uint32(len(next))
	return uint32(len(next)), rest
}

// alloc reserves n bytes at the arena's end, in a new chunk when the last
// one lacks room. It reports false when the arena has no chunk left.
func (a *arena) alloc(n int) (ref uint32, b []byte, ok bool) {
	chunks := *a.chunks.Load()
	if len(chunks) == 0 || a.tail+n > len(chunks[len(chunks)-1].b) || a.tail >= maxChunk {
		if len(chunks) == maxChunks {
			return 0, nil, false
		}
		c := new(chunk)
		c.b = blockBytes(c, max(a.next, n))
		next := append(chunks[:len(chunks):len(chunks)], c)
		a.chunks.Store(&next)
		chunks, a.tail, a.next = next, 0, min(2*a.next, maxChunk)
	}
	ref = uint32(len(chunks)-1)<<offsetBits | uint32(a.tail)
	b = chunks[len(chunks)-1].b[a.tail : a.tail+n : a.tail+n]
	a.tail += n
	return ref, b, true
}

// maybeCompact compacts sh when garbage passes its share. Called under
// sh.mu.
func (sh *shard) maybeCompact(o *Overlay) {
	g := sh.garbage.Load()
	if g < int64(o.compactMin) || g*garbageShare < sh.bytes.Load() {
		return
	}
	sh.compact(o, int(sh.n.Load()), nil)
}

// compact copies the records of sh whose slot positions keep reports true
// for (nil: all), survivors of them, into a fresh arena and a table sized
// for them, and puts them in service. Called under sh.mu.
func (sh *shard) compact(o *Overlay, survivors int, keep func(pos int) bool) {
	live := sh.bytes.Load() - sh.garbage.Load()
	first := minChunk
	for first < maxChunk && int64(first) < live/2 {
		first *= 2
	}
	sh.rebuild(o, slotsFor(survivors), newArena(first), keep)
	sh.compactions.Add(1)
}

// slotsFor is a table for n entries, 2/3 full.
func slotsFor(n int) int { return max(minSlots, n*3/2+1) }

// rebuild makes a table of slots slots over arena a holding the records of
// sh whose positions in the table in service keep reports true for (nil:
// all), copied into a when a is not
// the arena in service, and puts it in service. Called under sh.mu.
func (sh *shard) rebuild(o *Overlay, slots int, a *arena, keep func(pos int) bool) *index {
	old := sh.idx.Load()
	copying := a != old.arena
	ix := newIndex(slots, a)
	var n, bytes int64
	for i := range old.slots {
		s := atomic.LoadUint64(&old.slots[i])
		if s == 0 || (keep != nil && !keep(i)) {
			continue
		}
		b, _ := old.recordAt(s)
		k, _ := recordKey(b)
		h := o.hash(k)
		if copying {
			size := recordSize(b)
			ref, dst, ok := a.alloc(size)
			if !ok {
				panic("edge/store: a compacted arena cannot hold what the old one did")
			}
			copy(dst, b[:size])
			s = s&^0xffffffff | uint64(ref)
			bytes += int64(size)
		}
		for j := ix.home(h); ; j = ix.next(j) {
			if ix.slots[j] == 0 {
				ix.slots[j] = s
				break
			}
		}
		n++
	}
	runtime.KeepAlive(old)
	// The table is complete before it is published; the store orders it
	// before any reader's load of the pointer.
	sh.idx.Store(ix)
	sh.n.Store(n)
	if copying {
		sh.bytes.Store(bytes)
		sh.garbage.Store(0)
	}
	return ix
}

// Prune deletes every entry drop reports true for, shard by shard, under
// the shard's lock, so an Apply of the same code is either seen by drop or
// happens after the delete. A shard that loses entries is compacted (its
// survivors copied into a fresh arena and table sized for them), so a
// snapshot swap that prunes a bulk load gives its memory back. code and
// the Record are valid during the call only. It returns how many entries
// it deleted.
func (o *Overlay) Prune(drop func(d link.DomainID, code []byte, r Record) bool) int {
	total := 0
	var buf [base62.Length]byte
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		ix := sh.idx.Load()
		// A bit per slot of the table in service: 1/64 of its size, where
		// a set of the dropped would cost more than the entries.
		var dropped []uint64
		n := 0
		for j := range ix.slots {
			s := atomic.LoadUint64(&ix.slots[j])
			if s == 0 {
				continue
			}
			if d, code, r := sh.read(ix, s, &buf); drop(d, code, r) {
				if dropped == nil {
					dropped = make([]uint64, (len(ix.slots)+63)/64)
				}
				dropped[j/64] |= 1 << (j % 64)
				n++
			}
		}
		runtime.KeepAlive(ix)
		if n > 0 {
			sh.compact(o, int(sh.n.Load())-n, func(pos int) bool { return dropped[pos/64]&(1<<(pos%64)) == 0 })
			total += n
		}
		sh.mu.Unlock()
	}
	return total
}

// read decodes the domain, code and record a slot of ix refers to; a
// code held by its value is spelled into buf.
func (sh *shard) read(ix *index, s uint64, buf *[base62.Length]byte) (link.DomainID, []byte, Record) {
	b, c := ix.recordAt(s)
	k, next := recordKey(b)
	code := k.custom
	if code == nil {
		id := k.id - 1
		for i := base62.Length - 1; i >= 0; i-- {
			buf[i] = base62.Alphabet[id%62]
			id /= 62
		}
		code = buf[:]
	}
	var r Record
	readRecord(&r, b, next, *sh.origins.Load(), c)
	return k.domain, code, r
}

// Range calls fn for every entry held until fn returns false. Entries
// applied meanwhile may or may not be seen. code and the Record's bytes
// are valid during the call only (copy them to keep them).
func (o *Overlay) Range(fn func(d link.DomainID, code []byte, r Record) bool) {
	var buf [base62.Length]byte
	for i := range o.shards {
		sh := &o.shards[i]
		ix := sh.idx.Load()
		for j := range ix.slots {
			s := atomic.LoadUint64(&ix.slots[j])
			if s == 0 {
				continue
			}
			if !fn(sh.read(ix, s, &buf)) {
				return
			}
		}
		runtime.KeepAlive(ix)
	}
}

// Len is the number of codes held.
func (o *Overlay) Len() int {
	n := int64(0)
	for i := range o.shards {
		n += o.shards[i].n.Load()
	}
	return int(n)
}

// OverlayStats describes what the overlay holds and costs.
type OverlayStats struct {
	Entries int
	// RecordBytes are the arenas' records, live and garbage; Garbage
	// those replaced by newer versions, until a compaction drops them.
	RecordBytes, Garbage int64
	// IndexBytes are the tables' slots.
	IndexBytes  int64
	Compactions int64
	// Refused counts entries Apply could not hold.
	Refused int64
}

// Stats sums the shards' counters; each is exact, the sum a moment's view.
func (o *Overlay) Stats() OverlayStats {
	var s OverlayStats
	for i := range o.shards {
		sh := &o.shards[i]
		s.Entries += int(sh.n.Load())
		s.RecordBytes += sh.bytes.Load()
		s.Garbage += sh.garbage.Load()
		s.IndexBytes += int64(len(sh.idx.Load().slots)) * 8
		s.Compactions += sh.compactions.Load()
		s.Refused += sh.refused.Load()
	}
	return s
}
