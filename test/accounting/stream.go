package accounting

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Numberer is what the accounting needs of the worker's codec: what it
// does with an input value, and the bytes it writes for a new number.
// *codec.Codec is one.
type Numberer interface {
	Inspect(value []byte) codec.Inspection
	AppendNumbered(dst, value []byte, insp codec.Inspection, id int64) []byte
}

// plainNumberer is a Numberer as outputRecord takes it; it never fails.
type plainNumberer struct{ n Numberer }

func (p plainNumberer) Inspect(_ context.Context, value []byte) (codec.Inspection, error) {
	return p.n.Inspect(value), nil
}

func (p plainNumberer) AppendNumbered(_ context.Context, dst, value []byte, insp codec.Inspection, id int64) ([]byte, error) {
	return p.n.AppendNumbered(dst, value, insp, id), nil
}

// DefaultNumberWindow is how much number time a Stream's uniqueness check
// covers behind the newest number it has seen.
const DefaultNumberWindow = 2 * time.Minute

// Stream is the accounting of Check for a run that does not end: inputs,
// outputs and dead letters are fed to it as they are produced and read, in
// any order between the three, and it keeps only what is still open, so
// that a run of hours holds as much as a run of seconds. It checks the
// same things as Check, record by record, and its Report means the same.
//
// What it keeps:
//   - each input record until its output or dead letter is read (then the
//     record is dropped, and its offset joins a per-partition watermark);
//   - each output or dead letter read before its input was fed;
//   - per input partition: the offsets seen above the watermark (those that
//     came out of order), and the last offset and new number written;
//   - the numbers of the last window of number time (DefaultNumberWindow,
//     unless set) behind the newest number seen, to catch a number issued
//     twice. A number older than that cannot be checked: it is counted in
//     Report.Unchecked, which makes the report not OK, rather than passed.
//
// Outputs must be fed in the order of each output partition, as a
// consumer reads them; the per-partition order check relies on it. A
// Stream is safe for concurrent use.
type Stream struct {
	mu     sync.Mutex
	c      Numberer
	layout idgen.Layout
	window int64 // ms
	rep    Report

	pending map[srcKey]*kgo.Record   // inputs not yet seen
	early   map[srcKey][]early       // outputs and dead letters before their input
	parts   map[partKey]*partAccount // per input partition
	nums    map[int64]srcKey         // numbers within the window
	queue   []int64                  // nums in arrival order, from head
	head    int
	newest  int64 // ms of the newest number
	maxHeld Held
}

// srcKey is an input record's place.
type srcKey struct {
	topic     string
	partition int32
	offset    int64
}

type partKey struct {
	topic     string
	partition int32
}

// partAccount is what the Stream keeps of one input partition.
type partAccount struct {
	name      string             // topic[partition]
	seenBelow int64              // every offset below it was seen once
	above     map[int64]struct{} // offsets seen at or above seenBelow
	lastOff   int64              // last input offset written to the output
	lastID    int64              // last new number written
	hasOff    bool
	hasID     bool
	// order holds the partition's outputs in the order they were read,
	// from the first one whose input has not been fed yet: the order
	// check waits for it, so that it follows the order of writing.
	order []*orderItem
}

// orderItem is an output in a partition's order check.
type orderItem struct {
	offset  int64 // input offset
	id      int64
	renewed bool // a new number, not one passed through
	known   bool // its input was fed: it can be checked
	skip    bool // not part of the order (a duplicate, or a bad number)
}

// early is an output (or, with dead true, a dead letter) read before its
// input was fed.
type early struct {
	r    *kgo.Record
	dead bool
	item *orderItem
}

// Held is how much a Stream keeps: in-flight inputs, records that came out
// before their input, offsets seen out of order, and numbers in the window.
type Held struct {
	Pending, Early, OutOfOrder, Numbers int
}

// NewStream returns an empty accounting for a worker that ran with c and
// numbers of layout l, checking uniqueness over window of number time (0:
// DefaultNumberWindow).
func NewStream(c Numberer, l idgen.Layout, window time.Duration) *Stream {
	if window <= 0 {
		window = DefaultNumberWindow
	}
	return &Stream{c: c, layout: l, window: window.Milliseconds(), pending: map[srcKey]*kgo.Record{},
		early: map[srcKey][]early{}, parts: map[partKey]*partAccount{}, nums: map[int64]srcKey{}}
}

// Input feeds produced input records, with their offsets.
func (s *Stream) Input(recs ...*kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		k := srcKey{r.Topic, r.Partition, r.Offset}
		s.rep.In++
		s.part(k)
		s.pending[k] = r
		if es, ok := s.early[k]; ok {
			delete(s.early, k)
			for _, e := range es {
				s.match(k, e.r, e.dead, e.item)
			}
		}
	}
	s.noteHeld()
}

// Output feeds a record read from the output topic.
func (s *Stream) Output(r *kgo.Record) { s.feed(r, false) }

// DeadLetter feeds a record read from the dead-letter topic.
func (s *Stream) DeadLetter(r *kgo.Record) { s.feed(r, true) }

func (s *Stream) feed(r *kgo.Record, dead bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, _ := Header(r, codec.HeaderSource)
	topic, p, off, err := codec.ParseSource(src)
	if err != nil {
		s.rep.problem(&s.rep.Unattributed, "%s/%d/%d has source %q, not an input record", r.Topic, r.Partition, r.Offset, src)
		return
	}
	k := srcKey{topic, p, off}
	var item *orderItem
	if !dead {
		a := s.part(k)
		item = &orderItem{offset: off}
		a.order = append(a.order, item)
	}
	if _, ok := s.pending[k]; ok || s.seen(k) {
		s.match(k, r, dead, item)
		return
	}
	s.early[k] = append(s.early[k], early{r, dead, item})
	s.noteHeld()
}

func (s *Stream) part(k srcKey) *partAccount {
	pk := partKey{k.topic, k.partition}
	a, ok := s.parts[pk]
	if !ok {
		a = &partAccount{name: k.topic + "[" + strconv.Itoa(int(k.partition)) + "]", above: map[int64]struct{}{}}
		s.parts[pk] = a
	}
	return a
}

func (s *Stream) seen(k srcKey) bool {
	a, ok := s.parts[partKey{k.topic, k.partition}]
	if !ok {
		return false
	}
	_, above := a.above[k.offset]
	return k.offset < a.seenBelow || above
}

// match accounts for r, the output (with its place item in the order
// check) or dead letter of the input at k, which is pending or already
// seen.
func (s *Stream) match(k srcKey, r *kgo.Record, dead bool, item *orderItem) {
	rep := &s.rep
	srcStr := srcString(k)
	a := s.part(k)
	if item != nil {
		defer s.checkOrder(a)
		item.known, item.skip = true, true // unless output says otherwise
	}
	in, ok := s.pending[k]
	if !ok {
		var extra int
		rep.problem(&extra, "%s came out again (%s/%d/%d)", srcStr, r.Topic, r.Partition, r.Offset)
		rep.Duplicated++
		return
	}
	delete(s.pending, k)
	a.above[k.offset] = struct{}{}
	for {
		if _, ok := a.above[a.seenBelow]; !ok {
			break
		}
		delete(a.above, a.seenBelow)
		a.seenBelow++
	}
	if dead {
		s.rep.deadLetterRecord(srcStr, in, r)
		return
	}
	s.output(k, srcStr, in, r, item)
}

func (s *Stream) output(k srcKey, srcStr string, in, o *kgo.Record, item *orderItem) {
	rep := &s.rep
	numStr, _ := Header(o, codec.HeaderNumber)
	id, err := strconv.ParseInt(numStr, 10, 64)
	if err != nil || id < 0 {
		rep.problem(&rep.Mismatched, "output for %s: number header %q is not a number", srcStr, numStr)
		return
	}
	s.unique(k, srcStr, id)
	renewed, ok := rep.outputRecord(context.Background(), plainNumberer{s.c}, srcStr, in, o, id)
	if !ok {
		return
	}
	item.id, item.renewed, item.skip = id, renewed, false
}

// checkOrder checks a's outputs in the order they were read, up to the
// first whose input has not been fed: input offsets and new numbers must
// increase.
func (s *Stream) checkOrder(a *partAccount) {
	rep := &s.rep
	n := 0
	for _, it := range a.order {
		if !it.known {
			break
		}
		n++
		if it.skip {
			continue
		}
		if a.hasOff && it.offset <= a.lastOff {
			rep.problem(&rep.OrderViolations, "input %s offset %d written after offset %d", a.name, it.offset, a.lastOff)
		}
		a.lastOff, a.hasOff = it.offset, true
		if it.renewed {
			if a.hasID && it.id <= a.lastID {
				rep.problem(&rep.OrderViolations, "input %s offset %d got number %d, not above the previous %d", a.name, it.offset, it.id, a.lastID)
			}
			a.lastID, a.hasID = it.id, true
		}
	}
	clear(a.order[:n])
	a.order = a.order[n:]
	if len(a.order) == 0 {
		a.order = nil // let the backing array go
	}
}

// unique checks that id was given to no other input within the window,
// then keeps it, and forgets the numbers that fell out of the window.
func (s *Stream) unique(k srcKey, srcStr string, id int64) {
	rep := &s.rep
	p, _ := s.layout.Decompose(id)
	ms := p.UnixMs
	if ms < s.newest-s.window {
		// Its twin, if any, may have been forgotten: say so, never pass it.
		rep.problem(&rep.Unchecked, "number %d of %s is older than the %s uniqueness window", id, srcStr, time.Duration(s.window)*time.Millisecond)
		return
	}
	if prev, dup := s.nums[id]; dup {
		if src := srcString(prev); src != srcStr {
			rep.problem(&rep.Reissued, "number %d given to %s and %s", id, src, srcStr)
		}
		return
	}
	rep.Unique++
	s.nums[id] = k
	s.queue = append(s.queue, id)
	s.newest = max(s.newest, ms)
	// Forget from the front while the front is out of the window. Numbers
	// arrive almost in time order, so this forgets nearly all of them; a
	// straggler stays a little longer, which only costs memory.
	for s.head < len(s.queue) {
		q, _ := s.layout.Decompose(s.queue[s.head])
		if q.UnixMs >= s.newest-s.window {
			break
		}
		delete(s.nums, s.queue[s.head])
		s.head++
	}
	if s.head > 1024 && s.head > len(s.queue)/2 {
		s.queue = append(s.queue[:0], s.queue[s.head:]...)
		s.head = 0
	}
	s.noteHeld()
}

func srcString(k srcKey) string {
	return string(codec.AppendSource(nil, k.topic, k.partition, k.offset))
}

func (s *Stream) held() Held {
	h := Held{Pending: len(s.pending), Numbers: len(s.queue) - s.head}
	for _, es := range s.early {
		h.Early += len(es)
	}
	for _, a := range s.parts {
		h.OutOfOrder += len(a.above)
	}
	return h
}

func (s *Stream) noteHeld() {
	h := s.held()
	m := &s.maxHeld
	m.Pending, m.Early, m.OutOfOrder, m.Numbers = max(m.Pending, h.Pending), max(m.Early, h.Early),
		max(m.OutOfOrder, h.OutOfOrder), max(m.Numbers, h.Numbers)
}

// Held returns what the Stream keeps now, and the most it has kept.
func (s *Stream) Held() (now, most Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held(), s.maxHeld
}

// Report is the accounting so far. Once every output and dead letter of
// every fed input has been read (the worker stopped, the topics read to
// their end), inputs still pending are lost and records that came out
// before an input that never came are unattributed; before that, they
// are in flight and counted as such.
func (s *Stream) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := s.rep
	rep.Problems = append([]string(nil), s.rep.Problems...)
	for k := range s.pending {
		rep.Lost++
		if len(rep.Problems) < 5 {
			rep.Problems = append(rep.Problems, "lost "+srcString(k))
		}
	}
	for k, es := range s.early {
		for range es {
			rep.problem(&rep.Unattributed, "%s came out, but no such input was produced", srcString(k))
		}
	}
	return rep
}
