package audit

import (
	"math/bits"
	"time"

	"github.com/flakestream/flakestream/idgen"
)

// dupWindow remembers the numbers seen within a window of number time, so
// the audit consumer can say whether a number was seen before.
//
// Numbers carry their millisecond, so the window is a ring of buckets, each
// holding the numbers of one span of number time (1,024 ms under the
// default layout and a 10-minute window). A bucket is dropped whole when the
// watermark (the newest number time seen, never more than the clock plus the
// allowed skew) moves a window past it: no per-entry timestamps, no sweeps.
// Number time rather than arrival time makes the answer a property of the
// stream, not of when or how fast the consumer read it: a backlog read an
// hour late, or records read again after a restart, are judged the same way.
//
// Memory is bounded by maxEntries. When a number would pass it, the oldest
// bucket is evicted first (counted in evictions): the window is then
// effectively shorter, and numbers older than the evicted bucket are no
// longer checked. Under the default layout an entry is a uint32 (the
// number's offset from its bucket's first number) in an open-addressing
// set; see BenchmarkDupWindowMemory for the bytes an entry costs.
//
// A dupWindow is not safe for concurrent use.
type dupWindow struct {
	timeRing
	compact    bool // entries are uint32 offsets from the bucket's first number
	ring       []bucket
	maxEntries int

	entries int
}

// timeRing is the geometry of a window of number time, shared by the dup
// window and the order window: a ring of n buckets of 1<<shift ms each,
// the newest bucket accepted (watermark) and the oldest still remembered
// after evictions (floor).
type timeRing struct {
	shift     uint // bucket span is 1<<shift ms of number time
	timeShift uint // bit position of a number's time field
	n         int64
	watermark int64 // newest bucket accepted; -1 before the first number
	floor     int64 // oldest bucket still remembered after evictions
	evictions uint64
}

// newTimeRing returns the ring of a window of the given length for
// numbers of layout l, and whether a number fits in 32 bits as an offset
// from its bucket's first number.
func newTimeRing(l idgen.Layout, window time.Duration) (timeRing, bool) {
	low := uint(l.TimeShift())
	ms := max(window.Milliseconds(), 1)
	// Spans of about 1/64 of the window keep the overshoot of wholesale
	// expiry under 2%; a span that keeps (span<<low) within 32 bits halves
	// the memory of an entry, worth up to 64k buckets.
	shift := uint(0)
	if ms >= 128 {
		shift = uint(bits.Len64(uint64(ms/64))) - 1
	}
	compact := false
	if low+shift <= 32 {
		compact = true
	} else if low <= 32 && ms>>(32-low) <= 1<<16 {
		shift, compact = 32-low, true
	}
	n := (ms+(1<<shift)-1)>>shift + 1
	return timeRing{shift: shift, timeShift: low, n: n, watermark: -1}, compact
}

// ringSlots is what the timeRing's shared steps need of a window's ring
// of buckets.
type ringSlots interface {
	// bucketNo points at the number of the bucket ring slot holds (-1:
	// none).
	bucketNo(slot int64) *int64
	// slotLen is how many entries ring slot holds.
	slotLen(slot int64) int
	// dropSlot empties ring slot, frees its memory, and sets its number
	// to -1.
	dropSlot(slot int64)
}

// enter readies bucket b for one more number under the clock's limit
// bucket: it reports false if b is outside the window; else it moves the
// watermark up to b and makes b's ring slot hold b, emptying an older
// bucket there. The dup window and the order window share it.
func (r *timeRing) enter(b, limit int64, slots ringSlots) bool {
	if b < 0 || !r.checkable(b, r.watermark, limit) {
		return false
	}
	if b > r.watermark {
		r.advance(b, slots)
	}
	if no := slots.bucketNo(b % r.n); *no != b {
		slots.dropSlot(b % r.n)
		*no = b
	}
	return true
}

// advance moves the watermark to bucket b, emptying the ring slot of each
// bucket that falls out of the window: at most the whole ring, however
// far b jumps.
func (r *timeRing) advance(b int64, slots ringSlots) {
	from := max(r.watermark+1, b-r.n+1)
	if r.watermark < 0 {
		from = b
	}
	for nb := from; nb <= b; nb++ {
		slots.dropSlot(nb % r.n)
	}
	r.watermark = b
}

// evictOldest drops the oldest remembered bucket that holds entries, to
// make room, and raises the floor past it unless it is the newest bucket
// (cur), which keeps filling.
func (r *timeRing) evictOldest(cur int64, slots ringSlots) {
	for nb := r.lowest(r.watermark); nb <= r.watermark; nb++ {
		slot := nb % r.n
		if *slots.bucketNo(slot) != nb || slots.slotLen(slot) == 0 {
			continue
		}
		slots.dropSlot(slot)
		r.evictions++
		if nb < cur {
			r.floor = nb + 1
		}
		return
	}
}

// bucket holds the numbers of bucket number no; only one of the sets is in
// use, as the window is compact or not.
type bucket struct {
	no  int64
	s32 idSet[uint32]
	s64 idSet[uint64]
}

func (b *bucket) len() int { return b.s32.n + b.s64.n }

// newDupWindow returns a window of the given length for numbers of layout l,
// holding at most maxEntries numbers.
func newDupWindow(l idgen.Layout, window time.Duration, maxEntries int) *dupWindow {
	tr, compact := newTimeRing(l, window)
	w := &dupWindow{timeRing: tr, compact: compact, maxEntries: max(maxEntries, 1)}
	w.ring = make([]bucket, tr.n)
	for i := range w.ring {
		w.ring[i].no = -1
	}
	return w
}

// spanMs is the length of number time one bucket covers.
func (w *timeRing) spanMs() int64 { return 1 << w.shift }

// bucketOf returns the bucket number of a number.
func (w *timeRing) bucketOf(id int64) int64 { return id >> w.timeShift >> w.shift }

// lowest returns the oldest bucket a check may use when the watermark is wm.
func (w *timeRing) lowest(wm int64) int64 { return max(wm-(w.n-1), w.floor) }

// checkable reports whether a number in bucket b can be checked (and
// remembered) under watermark wm and the clock's limit bucket: it must lie
// within the window behind the watermark and not beyond the limit.
func (w *timeRing) checkable(b, wm, limit int64) bool {
	if b > limit {
		return false
	}
	return b >= w.lowest(max(wm, b))
}

// contains reports whether id is remembered.
func (w *dupWindow) contains(id int64) bool {
	b := w.bucketOf(id)
	if b < 0 || b > w.watermark || b < w.lowest(w.watermark) {
		return false
	}
	bk := &w.ring[b%w.n]
	if bk.no != b {
		return false
	}
	if w.compact {
		return bk.s32.has(uint32(id - b<<w.shift<<w.timeShift))
	}
	return bk.s64.has(uint64(id))
}

// add remembers id unless it is outside the window. limit is the newest
// bucket the clock allows: numbers beyond it do not move the watermark, so
// one number from far in the future cannot empty the window. It reports
// whether id was new and remembered.
func (w *dupWindow) add(id, limit int64) bool {
	b := w.bucketOf(id)
	if !w.enter(b, limit, w) {
		return false
	}
	bk := &w.ring[b%w.n]
	k32, k64 := uint32(id-b<<w.shift<<w.timeShift), uint64(id)
	if (w.compact && bk.s32.has(k32)) || (!w.compact && bk.s64.has(k64)) {
		return false
	}
	if w.entries >= w.maxEntries {
		w.evictOldest(b, w)
		bk.no = b // in case the oldest was this very bucket
	}
	if w.compact {
		bk.s32.add(k32)
	} else {
		bk.s64.add(k64)
	}
	w.entries++
	return true
}

func (w *dupWindow) bucketNo(slot int64) *int64 { return &w.ring[slot].no }
func (w *dupWindow) slotLen(slot int64) int     { return w.ring[slot].len() }
func (w *dupWindow) dropSlot(slot int64)        { w.drop(&w.ring[slot]) }

// drop empties a bucket and frees its memory: after a burst, a reused
// bucket must not keep a set sized for the burst.
func (w *dupWindow) drop(bk *bucket) {
	w.entries -= bk.len()
	bk.s32, bk.s64 = idSet[uint32]{}, idSet[uint64]{}
	bk.no = -1
}

// effectiveMs is how much number time the window covers now: the window,
// or less after evictions.
func (w *timeRing) effectiveMs() int64 {
	if w.watermark < 0 {
		return 0
	}
	return (w.watermark - w.lowest(w.watermark) + 1) << w.shift
}

// tableBytes is the memory of the sets' slot tables: what an entry costs,
// without the ring's fixed overhead (about 100 bytes a bucket).
func (w *dupWindow) tableBytes() int {
	n := 0
	for i := range w.ring {
		n += 4*len(w.ring[i].s32.slots) + 8*len(w.ring[i].s64.slots)
	}
	return n
}

// idSet is an open-addressing hash set of integers with linear probing.
// Zero marks an empty slot, so a zero key is kept in a flag. It grows by
// doubling at 3/4 full, so its load stays between 3/8 and 3/4.
type idSet[K uint32 | uint64] struct {
	slots   []K
	n       int
	hasZero bool
	shift   uint // 64 - log2(len(slots))
}

const idSetMinSlots = 16

// slot is Fibonacci hashing: the top bits of the key times 2^64/phi, which
// spreads the runs of consecutive numbers a generator issues.
func (s *idSet[K]) slot(k K) int {
	return int(uint64(k) * 0x9E3779B97F4A7C15 >> s.shift)
}

func (s *idSet[K]) has(k K) bool {
	if k == 0 {
		return s.hasZero
	}
	if len(s.slots) == 0 {
		return false
	}
	return s.slots[s.probe(k)] == k
}

// probe returns the slot holding k or, when k is absent, the empty slot
// where it goes (linear probing; the table is never full).
func (s *idSet[K]) probe(k K) int {
	mask := len(s.slots) - 1
	i := s.slot(k)
	for s.slots[i] != k && s.slots[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// add inserts k and reports whether it was absent.
func (s *idSet[K]) add(k K) bool {
	if k == 0 {
		if s.hasZero {
			return false
		}
		s.hasZero = true
		s.n++
		return true
	}
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	i := s.probe(k)
	if s.slots[i] == k {
		return false
	}
	s.slots[i] = k
	s.n++
	return true
}

func (s *idSet[K]) grow() {
	old := s.slots
	size := max(2*len(old), idSetMinSlots)
	s.slots = make([]K, size)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, k := range old {
		if k == 0 {
			continue
		}
		i := s.slot(k)
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = k
	}
}
