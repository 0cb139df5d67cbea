package verify

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultNumberWindow is how much number time a Window's duplicate-number
// check covers behind the newest number it has checked.
const DefaultNumberWindow = 2 * time.Minute

// maxAhead bounds how far past the newest input fed a copy may name its
// source and still wait for it: a copy naming an offset further on is
// unattributed, rather than grown into a range of that size.
const maxAhead = 1 << 20

// Window is a Ledger for input that does not end, as `flakestream demo
// --serve` produces it: the input records are fed as they are produced,
// the copies as they are read, and what is settled is counted and
// forgotten, so that a run of hours holds about as much as a run of
// seconds. Its Report means what a Ledger's does, with the limits below.
//
// Each input partition's range grows as records are fed; the inputs of a
// partition must be fed in offset order, as a producer learns them. An
// offset is settled once every offset before it is: it is an input record
// with a copy in the output or the DLQ, or an offset below the newest
// input that is no input record. A settled offset's fate is counted then,
// and its state is dropped soon after. A further copy of a settled offset
// counts as duplicated (it cannot be told from a renumbered one any
// more). Numbers are checked for reuse as their offsets settle, against
// the numbers of the last window of number time (DefaultNumberWindow,
// unless set) behind the newest number checked; a number older than that
// cannot be checked and is counted as unchecked, which makes the run not
// exact, rather than passed.
//
// A Window is safe for concurrent use.
type Window struct {
	mu      sync.Mutex
	l       *Ledger
	numTime func(n int64) int64 // a number's time, ms
	span    int64               // ms
	settled map[*part]int64     // the first offset not settled
	inputTo map[*part]int64     // one past the newest input fed
	fates   Report              // the settled offsets' fates
	recent  map[int64]Coord     // numbers within the window, by source
	queue   []int64             // recent, in the order checked, from head
	head    int
	newest  int64 // ms
	most    WindowHeld
	// unchecked counts the numbers too old to check; dupCount the sources
	// beyond the first of a number, dups the first of them.
	unchecked int64
	dupCount  int64
	dups      []Fault
}

// WindowHeld is how much a Window keeps: offsets not yet settled, and
// numbers in the duplicate-number window.
type WindowHeld struct {
	InFlight, Numbers int64
}

// WindowReport is a Window's result: a Report, and the numbers it could
// not check (older than its window; Exact is false when there are any).
type WindowReport struct {
	Report
	UncheckedNumbers int64
}

// NewWindow returns a Window over every partition (0 to partitions-1) of
// topic, from offset 0, checking numbers over window of number time (0:
// DefaultNumberWindow); numTime gives a number's time in Unix
// milliseconds (idgen.Layout's Decompose).
func NewWindow(topic string, partitions int32, window time.Duration, numTime func(n int64) int64) *Window {
	if window <= 0 {
		window = DefaultNumberWindow
	}
	ranges := make([]Range, partitions)
	for p := range ranges {
		ranges[p] = Range{Topic: topic, Partition: int32(p)}
	}
	w := &Window{l: NewLedger(ranges), numTime: numTime, span: window.Milliseconds(),
		settled: map[*part]int64{}, inputTo: map[*part]int64{}, recent: map[int64]Coord{}}
	return w
}

// Input feeds an input record at c; hasNumber says it already carried a
// valid number. An input of a partition below one fed before is an error:
// the offsets between may have been settled as no input records.
func (w *Window) Input(c Coord, hasNumber bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.part(c)
	if p == nil {
		return fmt.Errorf("verify: input %s is outside the window's topic and partitions", c)
	}
	if c.Offset < w.inputTo[p] {
		return fmt.Errorf("verify: input %s fed after offset %d: inputs must be fed in offset order", c, w.inputTo[p]-1)
	}
	w.grow(p, c.Offset+1)
	w.inputTo[p] = c.Offset + 1
	w.l.Input(c, hasNumber)
	w.settle(p)
	return nil
}

// InputRecord feeds produced input record r, reading its value with f as
// the worker does.
func (w *Window) InputRecord(ctx context.Context, r *kgo.Record, f codec.Format) error {
	insp, err := f.Inspect(ctx, r.Value)
	if err != nil {
		return fmt.Errorf("verify: input %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	return w.Input(Coord{r.Topic, r.Partition, r.Offset}, insp.Kind == codec.HasNumber)
}

// Copy feeds r, read from the output topic (or, with dead, from the DLQ),
// reading a number the record has no header for with f.
func (w *Window) Copy(ctx context.Context, r *kgo.Record, dead bool, f codec.Format) error {
	return feedCopy(ctx, w, r, dead, f)
}

// Output records an output record at at, which names src and carries
// number n.
func (w *Window) Output(src, at Coord, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.copyPart(src, at); ok {
		w.l.Output(src, at, n)
		w.settle(p)
	}
}

// DeadLetter records a dead letter at at, which names src.
func (w *Window) DeadLetter(src, at Coord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.copyPart(src, at); ok {
		w.l.DeadLetter(src, at)
		w.settle(p)
	}
}

// Unattributed records a copy at at without a valid source header.
func (w *Window) Unattributed(at Coord, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.l.Unattributed(at, reason)
}

// Invalid records an output record at at, of source src, without a valid
// number.
func (w *Window) Invalid(src, at Coord, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.l.Invalid(src, at, reason)
}

// part is c's partition, nil outside the window.
func (w *Window) part(c Coord) *part {
	ps := w.l.parts[c.Topic]
	if c.Partition < 0 || int(c.Partition) >= len(ps) {
		return nil
	}
	return ps[c.Partition]
}

// copyPart finds the partition a copy of src is counted in, growing its
// range to src when the copy came before its input. ok is false when the
// copy was counted here: a further copy of a settled offset, or a source
// that is no input the window can take (far past the input, or outside
// its topic and partitions: the window covers all the input there is).
func (w *Window) copyPart(src, at Coord) (*part, bool) {
	p := w.part(src)
	if p == nil {
		w.l.Unattributed(at, fmt.Sprintf("source %s is outside the input topic's partitions", src))
		return nil, false
	}
	o := &w.l.out
	switch {
	case src.Offset < w.settled[p]:
		o.duplicated++
		o.ex.duplicated = addFault(o.ex.duplicated, Fault{Source: src.String(), Output: []string{at.String()},
			Reason: "a further copy of a record already accounted for"})
		return nil, false
	case src.Offset >= w.inputTo[p]+maxAhead:
		w.l.Unattributed(at, fmt.Sprintf("source %s is far past the newest input fed", src))
		return nil, false
	}
	w.grow(p, src.Offset+1)
	return p, true
}

// grow extends p's range to end at to, at least.
func (w *Window) grow(p *part, to int64) {
	if to <= p.r.To {
		return
	}
	n := int(to - p.r.From)
	words := (n + 63) / 64
	for _, b := range []*[]uint64{&p.rec, &p.marker, &p.hasNum} {
		old := len(*b)
		*b = slices.Grow(*b, words-old)[:words]
		clear((*b)[old:])
	}
	old := len(p.out)
	p.out = slices.Grow(p.out, n-old)[:n]
	clear(p.out[old:])
	p.nums = slices.Grow(p.nums, n-old)[:n]
	clear(p.nums[old:])
	p.r.To = to
	w.noteHeld()
}

// settle counts the fates of p's offsets that have become settled, checks
// their numbers, and drops the state of whole words of them.
func (w *Window) settle(p *part) {
	at := max(w.settled[p], p.r.From)
	for ; at < w.inputTo[p]; at++ {
		i := at - p.r.From
		if bit(p.rec, i) && p.out[i]&(outSeen|dlqSeen) == 0 {
			break
		}
		w.count(p, i)
	}
	w.settled[p] = at
	// Drop whole words only, so that the bit sets stay aligned; in chunks,
	// so that the slices are not cut for every record.
	if drop := (at - p.r.From) / 64 * 64; drop >= 4096 {
		p.r.From += drop
		p.out, p.nums = p.out[drop:], p.nums[drop:]
		p.rec, p.marker, p.hasNum = p.rec[drop/64:], p.marker[drop/64:], p.hasNum[drop/64:]
	}
	w.noteHeld()
}

// count tallies p's offset i and checks its number.
func (w *Window) count(p *part, i int64) {
	tallyOffset(p, i, &w.fates)
	if p.out[i]&outSeen != 0 {
		w.checkNumber(p.nums[i], Coord{p.r.Topic, p.r.Partition, p.r.From + i})
	}
}

// checkNumber checks that n was given to no other source within the
// window, then keeps it, and forgets the numbers that fell out of the
// window.
func (w *Window) checkNumber(n int64, src Coord) {
	ms := w.numTime(n)
	if ms < w.newest-w.span {
		// Its twin, if any, may have been forgotten: say so, never pass it.
		w.unchecked++
		return
	}
	if prev, dup := w.recent[n]; dup {
		if prev != src {
			w.dupCount++
			w.dups = addFault(w.dups, Fault{Numbers: []int64{n}, Reason: fmt.Sprintf("number on 2 sources: [%s %s]", prev, src)})
		}
		return
	}
	w.recent[n] = src
	w.queue = append(w.queue, n)
	w.newest = max(w.newest, ms)
	// Forget from the front while the front is out of the window. Numbers
	// come almost in time order, so this forgets nearly all of them; a
	// straggler stays a little longer, which only costs memory.
	for w.head < len(w.queue) && w.numTime(w.queue[w.head]) < w.newest-w.span {
		delete(w.recent, w.queue[w.head])
		w.head++
	}
	if w.head > 1024 && w.head > len(w.queue)/2 {
		w.queue = append(w.queue[:0], w.queue[w.head:]...)
		w.head = 0
	}
}

func (w *Window) held() WindowHeld {
	h := WindowHeld{Numbers: int64(len(w.queue) - w.head)}
	for _, ps := range w.l.parts {
		for _, p := range ps {
			h.InFlight += p.r.To - max(w.settled[p], p.r.From)
		}
	}
	return h
}

func (w *Window) noteHeld() {
	h := w.held()
	w.most.InFlight, w.most.Numbers = max(w.most.InFlight, h.InFlight), max(w.most.Numbers, h.Numbers)
}

// Held returns what the Window keeps now, and the most it has kept.
func (w *Window) Held() (now, most WindowHeld) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held(), w.most
}

// Report accounts for every input record fed. Call it once every copy of
// every input fed has been read (the worker stopped, the topics read to
// their end): an input with no copy then is lost, and a copy whose input
// never came is unattributed. It settles everything, so call it once.
func (w *Window) Report() WindowReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.l.sortedParts() {
		for at := max(w.settled[p], p.r.From); at < p.r.To; at++ {
			w.count(p, at-p.r.From)
		}
		w.settled[p] = math.MaxInt64
	}
	for _, e := range w.l.out.extras {
		w.checkNumber(e.n, e.src)
	}
	rep := w.l.outReport()
	c, f := &rep.Counts, &w.fates.Counts
	c.Input, c.Numbered, c.Passthrough, c.DeadLettered, c.Lost, c.Pending = f.Input, f.Numbered, f.Passthrough, f.DeadLettered, f.Lost, f.Pending
	c.Unattributed += f.Unattributed
	c.DuplicateNumbers = w.dupCount
	rep.Faults.Lost, rep.Faults.DuplicateNumbers = w.fates.Faults.Lost, w.dups
	for _, fl := range w.fates.Faults.Unattributed {
		rep.Faults.Unattributed = addFault(rep.Faults.Unattributed, fl)
	}
	rep.setExact()
	rep.Exact = rep.Exact && w.unchecked == 0
	return WindowReport{Report: rep, UncheckedNumbers: w.unchecked}
}
