package verify

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/flakestream/flakestream/codec"
)

// Range is the part of one input partition a reconciliation covers:
// offsets [From, To).
type Range struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
}

// Coord names a record: topic/partition/offset.
type Coord struct {
	Topic     string
	Partition int32
	Offset    int64
}

func (c Coord) String() string {
	return string(codec.AppendSource(nil, c.Topic, c.Partition, c.Offset))
}

// MaxExamples is how many faults of each kind a Report names.
const MaxExamples = 10

// Ledger is the exact accounting of a range of input against the output
// and the dead-letter topic. It is fed every record of the input range
// (Input, Marker) and every record of the output and the DLQ (Output,
// DeadLetter, Unattributed), in any order, and its Report says what became
// of each input record. The CLI's `flakestream verify`, the fault suite and
// the tests all account with it, so they mean one thing by "lost".
//
// Memory is fixed by the range, not by what is found in it: per input
// offset one byte of output state and three bits of input state, plus one
// int64 for the number the offset's first copy carries, about 9.4 bytes an
// offset (94 MB for 10,000,000). A copy beyond the first is kept only as
// one of the first MaxExamples of its kind, and a renumbered copy's number
// as one entry (16 bytes) for the duplicate-number check.
//
// The input side (Input, Marker) and the output side (Output, DeadLetter,
// Unattributed, Invalid) may each run in goroutines of their own: they
// touch disjoint state. On the input side, calls for different partitions
// may run concurrently (each partition's state is its own); the output
// side is not safe for concurrent use.
type Ledger struct {
	parts map[string][]*part // by topic, then partition (nil: not in range)

	in  inSide
	out outSide
}

// part is the state of one input partition's range.
type part struct {
	r      Range
	rec    []uint64 // bit: the offset is an input record
	marker []uint64 // bit: the offset is a transaction marker
	hasNum []uint64 // bit: the input record already carried a valid number
	out    []uint8  // outSeen, dlqSeen, renumbered
	nums   []int64  // the number of the offset's first output copy
	// pendingFrom: a record at or after it that is in neither the output
	// nor the DLQ is pending (the worker has not committed it yet), not
	// lost; MaxInt64 when unknown.
	pendingFrom int64
}

const (
	outSeen uint8 = 1 << iota
	dlqSeen
	renumberedFlag
)

// inSide is what only the input side writes.
type inSide struct {
	notCheckable int64
}

// outSide is what only the output side writes.
type outSide struct {
	outputs, deadLetters int64
	duplicated           int64
	renumbered           int64
	unattributed         int64
	invalid              int64
	outside              int64
	extras               []sourcedNumber // numbers of copies beyond a source's first
	ex                   examples
}

// sourcedNumber is a number and the source it was given to.
type sourcedNumber struct {
	n   int64
	src Coord
}

// examples are the first faults of each kind found on the output side.
type examples struct {
	duplicated, renumbered, unattributed, invalid []Fault
}

// Fault is one fault found, for the report: the input record (Source),
// the numbers its copies carry, and where the copies are (Output: the
// output or DLQ coordinates of the copies beyond the first, as far as the
// ledger knows them). Reason says more where the kind alone does not.
type Fault struct {
	Source  string   `json:"source,omitempty"`
	Numbers []int64  `json:"numbers,omitempty"`
	Output  []string `json:"output,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// NewLedger returns a ledger for ranges. A range with To < From is
// empty; a partition named twice keeps the last range.
func NewLedger(ranges []Range) *Ledger {
	l := &Ledger{parts: map[string][]*part{}}
	for _, r := range ranges {
		n := max(r.To-r.From, 0)
		words := (n + 63) / 64
		p := &part{r: r, rec: make([]uint64, words), marker: make([]uint64, words), hasNum: make([]uint64, words),
			out: make([]uint8, n), nums: make([]int64, n), pendingFrom: math.MaxInt64}
		ps := l.parts[r.Topic]
		for int(r.Partition) >= len(ps) {
			ps = append(ps, nil)
		}
		ps[r.Partition] = p
		l.parts[r.Topic] = ps
	}
	return l
}

// Pending says that the worker's group has committed topic's partition
// up to committed (the next offset it will read): an input record at or
// after it that is in neither the output nor the DLQ is pending, not lost.
// Call it before Report; a partition it is not called for has no pending
// records, so a missing record there is lost.
func (l *Ledger) Pending(topic string, partition int32, committed int64) {
	if ps := l.parts[topic]; int(partition) < len(ps) && ps[partition] != nil {
		ps[partition].pendingFrom = committed
	}
}

// slot finds c's partition and index; ok is false outside every range.
func (l *Ledger) slot(c Coord) (*part, int64, bool) {
	ps := l.parts[c.Topic]
	if c.Partition < 0 || int(c.Partition) >= len(ps) || ps[c.Partition] == nil {
		return nil, 0, false
	}
	p := ps[c.Partition]
	if c.Offset < p.r.From || c.Offset >= p.r.To {
		return nil, 0, false
	}
	return p, c.Offset - p.r.From, true
}

func setBit(b []uint64, i int64)   { b[i>>6] |= 1 << (uint(i) & 63) }
func bit(b []uint64, i int64) bool { return b[i>>6]&(1<<(uint(i)&63)) != 0 }

// Input records an input record at c; hasNumber says it already carried a
// valid number (the worker passes it through). A record outside the
// ranges, or fed twice, is ignored.
func (l *Ledger) Input(c Coord, hasNumber bool) {
	p, i, ok := l.slot(c)
	if !ok || bit(p.rec, i) {
		return
	}
	setBit(p.rec, i)
	if hasNumber {
		setBit(p.hasNum, i)
	}
}

// Marker records that offset c is a transaction marker: it holds no order.
func (l *Ledger) Marker(c Coord) {
	if p, i, ok := l.slot(c); ok {
		setBit(p.marker, i)
	}
}

// NotCheckable counts n input offsets of the ranges that can no longer be
// read (retention or compaction removed them): they are reported, never
// counted as lost. Call it from one goroutine, outside the reading.
func (l *Ledger) NotCheckable(n int64) { l.in.notCheckable += n }

// Output records an output record at at, which names src as its source
// and carries number n.
func (l *Ledger) Output(src, at Coord, n int64) {
	o := &l.out
	p, i, ok := l.copySlot(src, &o.outputs)
	if !ok {
		return
	}
	st := p.out[i]
	switch {
	case st&(outSeen|dlqSeen) == 0:
		p.out[i] = st | outSeen
		p.nums[i] = n
		return
	case st&outSeen != 0 && p.nums[i] != n:
		o.duplicated++
		o.addExtra(n, src)
		if st&renumberedFlag == 0 {
			p.out[i] |= renumberedFlag
			o.renumbered++
			o.ex.renumbered = addFault(o.ex.renumbered, Fault{Source: src.String(), Numbers: []int64{p.nums[i], n}, Output: []string{at.String()}})
		} else {
			o.ex.renumbered = appendToFault(o.ex.renumbered, src.String(), n, at.String())
		}
	case st&outSeen == 0: // dead-lettered before, now numbered too
		p.out[i] = st | outSeen
		p.nums[i] = n
		o.duplicated++
		o.ex.duplicated = addFault(o.ex.duplicated, Fault{Source: src.String(), Numbers: []int64{n}, Output: []string{at.String()}, Reason: "dead-lettered and numbered"})
	default:
		o.duplicated++
		o.ex.duplicated = addFault(o.ex.duplicated, Fault{Source: src.String(), Numbers: []int64{n}, Output: []string{at.String()}})
	}
}

// DeadLetter records a dead letter at at, which names src as its source.
func (l *Ledger) DeadLetter(src, at Coord) {
	o := &l.out
	p, i, ok := l.copySlot(src, &o.deadLetters)
	if !ok {
		return
	}
	if st := p.out[i]; st&(outSeen|dlqSeen) != 0 {
		o.duplicated++
		o.ex.duplicated = addFault(o.ex.duplicated, Fault{Source: src.String(), Output: []string{at.String()}, Reason: "a further dead letter"})
	}
	p.out[i] |= dlqSeen
}

// copySlot finds the partition and index of a copy's source src, and
// counts the copy in kind; a source outside every range is counted as
// such, and ok is false.
func (l *Ledger) copySlot(src Coord, kind *int64) (p *part, i int64, ok bool) {
	if p, i, ok = l.slot(src); !ok {
		l.out.outside++
		return nil, 0, false
	}
	*kind++
	return p, i, true
}

// Unattributed records an output or DLQ record at at whose source header
// is missing or malformed (reason says which).
func (l *Ledger) Unattributed(at Coord, reason string) {
	l.out.unattributed++
	l.out.ex.unattributed = addFault(l.out.ex.unattributed, Fault{Output: []string{at.String()}, Reason: reason})
}

// Invalid records an output record at at, of source src, that carries no
// valid number (reason says why).
func (l *Ledger) Invalid(src, at Coord, reason string) {
	l.out.invalid++
	l.out.ex.invalid = addFault(l.out.ex.invalid, Fault{Source: src.String(), Output: []string{at.String()}, Reason: reason})
}

func (o *outSide) addExtra(n int64, src Coord) {
	for _, e := range o.extras {
		if e.n == n && e.src == src {
			return
		}
	}
	o.extras = append(o.extras, sourcedNumber{n: n, src: src})
}

func addFault(l []Fault, f Fault) []Fault {
	if len(l) >= MaxExamples {
		return l
	}
	return append(l, f)
}

// appendToFault adds another copy to the example of source src, if it is
// one of those named.
func appendToFault(l []Fault, src string, n int64, at string) []Fault {
	for i := range l {
		if l[i].Source == src {
			if !slices.Contains(l[i].Numbers, n) {
				l[i].Numbers = append(l[i].Numbers, n)
			}
			l[i].Output = append(l[i].Output, at)
		}
	}
	return l
}

// Counts is what a reconciliation found, under the names outside checks
// read (`flakestream verify --json`).
type Counts struct {
	Input        int64 `json:"input"`
	Numbered     int64 `json:"numbered"`
	Passthrough  int64 `json:"passthrough"`
	DeadLettered int64 `json:"dead_lettered"`
	Lost         int64 `json:"lost"`
	// Pending counts input records in neither the output nor the DLQ at
	// or after the worker group's committed offset: not done yet, which
	// is no fault (see Ledger.Pending).
	Pending          int64 `json:"pending"`
	Duplicated       int64 `json:"duplicated"`
	Renumbered       int64 `json:"renumbered"`
	DuplicateNumbers int64 `json:"duplicate_numbers"`
	Unattributed     int64 `json:"unattributed"`
	NotCheckable     int64 `json:"not_checkable"`
	// InvalidNumbers counts output records whose number is missing or
	// does not parse; OutsideRange counts output and DLQ records whose
	// source is outside the ranges checked (not a fault).
	InvalidNumbers int64 `json:"invalid_numbers"`
	OutsideRange   int64 `json:"outside_range"`
	// Exact: every checkable input record is in the output or the DLQ
	// exactly once, with one number, no number on two sources, and every
	// output record names a source and carries a number.
	Exact bool `json:"exact"`
}

// Faults lists the first MaxExamples faults of each kind.
type Faults struct {
	Lost             []Fault `json:"lost,omitempty"`
	Duplicated       []Fault `json:"duplicated,omitempty"`
	Renumbered       []Fault `json:"renumbered,omitempty"`
	DuplicateNumbers []Fault `json:"duplicate_numbers,omitempty"`
	Unattributed     []Fault `json:"unattributed,omitempty"`
	InvalidNumbers   []Fault `json:"invalid_numbers,omitempty"`
}

// Report is a ledger's result.
type Report struct {
	Counts
	Faults Faults `json:"faults"`
}

func (r Report) String() string {
	c := r.Counts
	return fmt.Sprintf("input=%d numbered=%d passthrough=%d dead_lettered=%d lost=%d pending=%d duplicated=%d renumbered=%d duplicate_numbers=%d unattributed=%d not_checkable=%d invalid_numbers=%d outside_range=%d exact=%t",
		c.Input, c.Numbered, c.Passthrough, c.DeadLettered, c.Lost, c.Pending, c.Duplicated, c.Renumbered, c.DuplicateNumbers, c.Unattributed, c.NotCheckable, c.InvalidNumbers, c.OutsideRange, c.Exact)
}

// Report accounts for every input record. Call it once both sides are
// done; it only reads the ledger.
func (l *Ledger) Report() Report {
	rep := l.outReport()
	for _, p := range l.sortedParts() {
		for i := range p.out {
			tallyOffset(p, int64(i), &rep)
		}
	}
	l.duplicateNumbers(&rep)
	rep.setExact()
	return rep
}

// outReport is a Report of what the output side counted, before the
// input records' fates are tallied.
func (l *Ledger) outReport() Report {
	o := &l.out
	rep := Report{Counts: Counts{NotCheckable: l.in.notCheckable, Duplicated: o.duplicated,
		Renumbered: o.renumbered, Unattributed: o.unattributed, InvalidNumbers: o.invalid, OutsideRange: o.outside}}
	rep.Faults.Duplicated = o.ex.duplicated
	rep.Faults.Renumbered = o.ex.renumbered
	rep.Faults.Unattributed = o.ex.unattributed
	rep.Faults.InvalidNumbers = o.ex.invalid
	return rep
}

// setExact sets Exact from the fault counts.
func (r *Report) setExact() {
	c := &r.Counts
	c.Exact = c.Lost == 0 && c.Duplicated == 0 && c.Renumbered == 0 && c.DuplicateNumbers == 0 &&
		c.Unattributed == 0 && c.InvalidNumbers == 0
}

func (l *Ledger) sortedParts() []*part {
	var ps []*part
	for _, byP := range l.parts {
		for _, p := range byP {
			if p != nil {
				ps = append(ps, p)
			}
		}
	}
	slices.SortFunc(ps, func(a, b *part) int {
		return cmp.Or(cmp.Compare(a.r.Topic, b.r.Topic), cmp.Compare(a.r.Partition, b.r.Partition))
	})
	return ps
}

// tallyOffset counts the fate of p's offset i: an input record is
// numbered, passed through, dead-lettered, pending or lost; a copy of an
// offset that is no input record (a marker, or an offset never read) is
// unattributed.
func tallyOffset(p *part, i int64, rep *Report) {
	c := &rep.Counts
	st := p.out[i]
	at := Coord{p.r.Topic, p.r.Partition, p.r.From + i}
	if !bit(p.rec, i) {
		if st != 0 {
			what := "an offset that is no input record"
			if bit(p.marker, i) {
				what = "a transaction marker"
			}
			c.Unattributed++
			rep.Faults.Unattributed = addFault(rep.Faults.Unattributed, Fault{Source: at.String(), Reason: "source names " + what})
		}
		return
	}
	c.Input++
	switch {
	case st&outSeen != 0 && bit(p.hasNum, i):
		c.Passthrough++
	case st&outSeen != 0:
		c.Numbered++
	case st&dlqSeen != 0:
		c.DeadLettered++
	case at.Offset >= p.pendingFrom:
		c.Pending++
	default:
		c.Lost++
		rep.Faults.Lost = addFault(rep.Faults.Lost, Fault{Source: at.String()})
	}
}

// duplicateNumbers counts numbers carried by more than one source: for
// each number, the sources beyond the first. Each partition's first
// numbers are in offset order, which the worker makes increasing, so they
// are merged as sorted runs without a copy; a partition that is not in
// order (numbers passed through from upstream, say) is sorted in a copy.
func (l *Ledger) duplicateNumbers(rep *Report) {
	var runs []run
	for _, p := range l.sortedParts() {
		if r := newRun(p); r.at < len(r.nums) {
			runs = append(runs, r)
		}
	}
	if len(l.out.extras) > 0 {
		extra := make([]int64, len(l.out.extras))
		for i, e := range l.out.extras {
			extra[i] = e.n
		}
		slices.Sort(extra)
		runs = append(runs, run{nums: extra})
	}
	dups := map[int64]int{}
	h := runHeap(runs)
	heap.Init(&h)
	var last int64
	first := true
	for h.Len() > 0 {
		n := h[0].nums[h[0].at]
		if !first && n == last {
			rep.Counts.DuplicateNumbers++
			dups[n]++
		}
		last, first = n, false
		if h[0].next() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	if len(dups) > 0 {
		rep.Faults.DuplicateNumbers = l.nameDuplicateNumbers(dups)
	}
}

// nameDuplicateNumbers finds the sources of the first MaxExamples numbers
// in dups, for the report.
func (l *Ledger) nameDuplicateNumbers(dups map[int64]int) []Fault {
	bySrc := map[int64][]string{}
	for _, p := range l.sortedParts() {
		for i, st := range p.out {
			if st&outSeen == 0 {
				continue
			}
			if _, ok := dups[p.nums[i]]; ok {
				c := Coord{p.r.Topic, p.r.Partition, p.r.From + int64(i)}
				bySrc[p.nums[i]] = append(bySrc[p.nums[i]], c.String())
			}
		}
	}
	for _, e := range l.out.extras {
		if _, ok := dups[e.n]; ok {
			bySrc[e.n] = append(bySrc[e.n], e.src.String())
		}
	}
	nums := make([]int64, 0, len(bySrc))
	for n := range bySrc {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	var out []Fault
	for _, n := range nums[:min(len(nums), MaxExamples)] {
		out = append(out, Fault{Numbers: []int64{n}, Reason: fmt.Sprintf("number on %d sources: %v", len(bySrc[n]), bySrc[n])})
	}
	return out
}

// run is a sorted run of numbers in the duplicate-number merge. With
// seen set, only the entries whose state has outSeen count.
type run struct {
	nums []int64
	seen []uint8
	at   int
}

// skip moves at to the next entry that counts.
func (r *run) skip() {
	for r.seen != nil && r.at < len(r.nums) && r.seen[r.at]&outSeen == 0 {
		r.at++
	}
}

// next moves past the current entry; false when the run is done.
func (r *run) next() bool {
	r.at++
	r.skip()
	return r.at < len(r.nums)
}

// newRun returns p's first numbers as a sorted run: the partition's own
// slice when its numbers increase with the offset (the worker's order),
// else a sorted copy of them.
func newRun(p *part) run {
	var prev int64 = -1
	sorted, count := true, 0
	for i, n := range p.nums {
		if p.out[i]&outSeen == 0 {
			continue
		}
		count++
		if n <= prev {
			sorted = false
		}
		prev = n
	}
	if sorted {
		r := run{nums: p.nums, seen: p.out}
		r.skip()
		return r
	}
	cp := make([]int64, 0, count)
	for i, n := range p.nums {
		if p.out[i]&outSeen != 0 {
			cp = append(cp, n)
		}
	}
	slices.Sort(cp)
	return run{nums: cp}
}

type runHeap []run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].nums[h[i].at] < h[j].nums[h[j].at] }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(run)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
