package audit

import (
	"hash/maphash"
	"time"

	"github.com/flakestream/flakestream/idgen"
)

// orderWindow remembers the first numbered copy of every order seen within
// a window of number time, so the audit can say that an order came back
// with another number ("renumbered"). An order is named by its source (the
// flakestream-source header: where the worker read it) and, with --key, by
// its order key as well; the two are kept apart, so a source never matches
// a key.
//
// It has the dup window's shape and settings: the same ring of buckets of
// number time (an entry belongs to the bucket of its first copy's number),
// dropped whole when the watermark moves a window past them, and at most
// maxEntries entries, past which the oldest bucket is evicted. Unlike a
// number, an order's name carries no time, so one map indexes every
// bucket, and each bucket lists its entries' names to delete them when it
// goes.
//
// A name is kept as a 64-bit hash (the map key) and a 32-bit check from a
// second, independent hash, both seeded at random: the chance that another
// order passes for one in the window is about entries/2^96 per record,
// which a false "renumbered" page would need. Two names with the same
// 64-bit hash but different checks keep the first one only (the second
// goes unchecked), at a chance of about entries/2^64 per record.
//
// An entry costs the map's slot (8-byte key, 24-byte entry) and 8 bytes in
// its bucket's list; see BenchmarkOrderWindowMemory for the bytes it costs.
// Go maps do not shrink, so after a burst the map keeps the size of the
// most entries it held, never more than maxEntries.
//
// An orderWindow is not safe for concurrent use.
type orderWindow struct {
	timeRing
	ring       []orderBucket
	maxEntries int
	m          map[uint64]orderEntry
	seeds      [4]maphash.Seed // hash and check, of sources and of keys

	entries int

	parts   []partKey // the numbered partitions first copies are in
	partIdx map[partKey]uint32
}

// orderBucket lists the names of the entries of bucket number no.
type orderBucket struct {
	no    int64
	names []uint64
}

// orderName is an order's name in the window: its hash and check.
type orderName struct {
	hash  uint64
	check uint32
}

// orderEntry is an order's first numbered copy: its number and where it is
// (part indexes orderWindow.parts).
type orderEntry struct {
	id, offset int64
	part       uint32
	check      uint32
}

func newOrderWindow(l idgen.Layout, window time.Duration, maxEntries int) *orderWindow {
	tr, _ := newTimeRing(l, window)
	w := &orderWindow{timeRing: tr, maxEntries: max(maxEntries, 1), m: map[uint64]orderEntry{},
		partIdx: map[partKey]uint32{}}
	for i := range w.seeds {
		w.seeds[i] = maphash.MakeSeed()
	}
	w.ring = make([]orderBucket, tr.n)
	for i := range w.ring {
		w.ring[i].no = -1
	}
	return w
}

// sourceName and keyName name an order by its source or by its key.
func (w *orderWindow) sourceName(src string) orderName {
	return orderName{maphash.String(w.seeds[0], src), uint32(maphash.String(w.seeds[1], src))}
}

func (w *orderWindow) keyName(key []byte) orderName {
	return orderName{maphash.Bytes(w.seeds[2], key), uint32(maphash.Bytes(w.seeds[3], key))}
}

// part returns the index of a numbered partition, adding it if new.
func (w *orderWindow) part(k partKey) uint32 {
	if i, ok := w.partIdx[k]; ok {
		return i
	}
	i := uint32(len(w.parts))
	w.parts = append(w.parts, k)
	w.partIdx[k] = i
	return i
}

// lookup returns the first copy of the order named n, if remembered, and
// whether its hash is taken (by it, or by another name with that hash).
func (w *orderWindow) lookup(n orderName) (e orderEntry, found, taken bool) {
	e, taken = w.m[n.hash]
	return e, taken && e.check == n.check, taken
}

// add remembers e as the first copy of the order named n, unless its
// number is outside the window (limit is the newest bucket the clock
// allows, as for the dup window) or the name's hash is already taken. It
// reports whether e was remembered.
func (w *orderWindow) add(n orderName, e orderEntry, limit int64) bool {
	if _, taken := w.m[n.hash]; taken {
		return false
	}
	e.check = n.check
	if !w.place(w.bucketOf(e.id), limit) {
		return false
	}
	w.m[n.hash] = e
	w.list(n.hash, e.id)
	return true
}

// stage puts e in the map as the first copy of the order named n, whose
// hash the caller has just found free, without counting it or listing it
// in a bucket: records later in the same batch see it, and the batch's end
// either keeps it (commitStaged) or takes it out again (unstage). Staged
// in the map itself, an order costs one map access that misses the caches,
// not two.
func (w *orderWindow) stage(n orderName, e orderEntry) {
	e.check = n.check
	w.m[n.hash] = e
}

// unstage takes a staged order out again (its batch aborted).
func (w *orderWindow) unstage(hash uint64) { delete(w.m, hash) }

// commitStaged keeps a staged order: it is counted and listed in its
// bucket, or, if its number is outside the window by now, taken out.
func (w *orderWindow) commitStaged(hash uint64, id, limit int64) {
	if !w.place(w.bucketOf(id), limit) {
		delete(w.m, hash)
		return
	}
	w.list(hash, id)
}

// list counts the entry of hash and lists it in the bucket of its number,
// which place has made ready.
func (w *orderWindow) list(hash uint64, id int64) {
	bk := &w.ring[w.bucketOf(id)%w.n]
	bk.names = append(bk.names, hash)
	w.entries++
}

// place makes room for one more entry in bucket b: it reports false if b
// is outside the window, else moves the watermark to it, empties a ring
// slot that held an older bucket, and evicts the oldest bucket at the cap.
func (w *orderWindow) place(b, limit int64) bool {
	if !w.enter(b, limit, w) {
		return false
	}
	if w.entries >= w.maxEntries {
		w.evictOldest(b, w)
		w.ring[b%w.n].no = b // in case the oldest was this very bucket
	}
	return true
}

func (w *orderWindow) bucketNo(slot int64) *int64 { return &w.ring[slot].no }
func (w *orderWindow) slotLen(slot int64) int     { return len(w.ring[slot].names) }
func (w *orderWindow) dropSlot(slot int64)        { w.drop(&w.ring[slot]) }

// drop deletes a bucket's entries and frees its list.
func (w *orderWindow) drop(bk *orderBucket) {
	for _, h := range bk.names {
		delete(w.m, h)
	}
	w.entries -= len(bk.names)
	bk.names = nil
	bk.no = -1
}
