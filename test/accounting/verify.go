// Package accounting is the tests' accounting of a run: on top of the exact
// reconciliation that ships (package
// github.com/flakestream/flakestream/verify, whose Ledger Check counts
// lost, duplicated, renumbered and duplicate numbers with, so the tests and
// `flakestream verify` mean one thing by each), it checks what only a test
// that wrote the inputs can: every output byte for byte as the worker
// promises, and each input partition's order kept. The tests and the fault
// suite count with it.
package accounting

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/kread"
	pverify "github.com/flakestream/flakestream/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Report is the accounting of one run.
type Report struct {
	In          int // input records
	Numbered    int // output records that got a new number
	Passthrough int // output records that kept the number they came with
	DLQ         int // dead-lettered records
	Lost        int // input records found in neither output nor DLQ
	Duplicated  int // extra copies of input records (appearing more than once)
	Renumbered  int // input records whose copies carry more than one number
	Unique      int // distinct numbers in the output
	Reissued    int // numbers carried by more than one distinct input record
	// Faults in what was written, each with up to 5 examples in Problems.
	Mismatched      int // output bytes, key, headers or timestamp not as promised
	OrderViolations int // an input partition's records out of order, or numbers not increasing
	Unattributed    int // output records without a valid source header
	Problems        []string
}

// OK reports whether the run was exactly once and as promised.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Renumbered == 0 && r.Reissued == 0 && r.Mismatched == 0 &&
		r.OrderViolations == 0 && r.Unattributed == 0 && r.In == r.Numbered+r.Passthrough+r.DLQ
}

func (r Report) String() string {
	s := fmt.Sprintf("in=%d numbered=%d passthrough=%d dlq=%d lost=%d duplicated=%d renumbered=%d unique_numbers=%d reissued=%d mismatched=%d order_violations=%d unattributed=%d",
		r.In, r.Numbered, r.Passthrough, r.DLQ, r.Lost, r.Duplicated, r.Renumbered, r.Unique, r.Reissued, r.Mismatched, r.OrderViolations, r.Unattributed)
	if len(r.Problems) > 0 {
		s += "\n  " + strings.Join(r.Problems, "\n  ")
	}
	return s
}

func (r *Report) problem(counter *int, format string, args ...any) {
	*counter++
	if len(r.Problems) < 5 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Header returns the value of the last header named key.
func Header(r *kgo.Record, key string) (string, bool) {
	v, ok := codec.LastHeader(r.Headers, key)
	return string(v), ok
}

// Check accounts for inputs against the output and DLQ records. c is the
// codec the worker ran with (JSON values).
func Check(c *codec.Codec, inputs, outputs, dlq []*kgo.Record) Report {
	return CheckFormat(context.Background(), codec.JSONFormat{C: c}, inputs, outputs, dlq)
}

// CheckFormat is Check for a worker that ran with Format f (Avro or
// Protobuf through a registry, or JSON): each numbered output must be
// exactly f.AppendNumbered of its input. A Format error (the registry)
// counts as a mismatch, naming the record.
//
// What became of each input (lost, duplicated, renumbered, a number on two
// inputs, an output naming no input) is counted by the shipped
// reconciliation's Ledger, over the ranges the inputs span.
func CheckFormat(ctx context.Context, f codec.Format, inputs, outputs, dlq []*kgo.Record) Report {
	k := &checker{ctx: ctx, c: f, rep: Report{In: len(inputs)}, byKey: make(map[string]*kgo.Record, len(inputs)),
		numbers: make(map[int64]struct{}, len(outputs)), ledger: pverify.NewLedger(spans(inputs))}
	for _, r := range inputs {
		k.byKey[string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))] = r
		insp, err := f.Inspect(ctx, r.Value)
		if err != nil {
			k.rep.problem(&k.rep.Mismatched, "input %s/%d/%d: inspect: %v", r.Topic, r.Partition, r.Offset, err)
		}
		k.ledger.Input(pverify.Coord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, insp.Kind == codec.HasNumber)
	}
	for _, o := range outputs {
		k.output(o)
	}
	for _, d := range dlq {
		k.deadLetter(d)
	}
	k.tally()
	k.checkOrder()
	return k.rep
}

// spans are the ranges of input offsets records cover, per partition.
func spans(recs []*kgo.Record) []pverify.Range {
	type tp struct {
		t string
		p int32
	}
	m := map[tp]*pverify.Range{}
	var order []tp
	for _, r := range recs {
		k := tp{r.Topic, r.Partition}
		rg, ok := m[k]
		if !ok {
			rg = &pverify.Range{Topic: r.Topic, Partition: r.Partition, From: r.Offset, To: r.Offset + 1}
			m[k] = rg
			order = append(order, k)
		}
		rg.From, rg.To = min(rg.From, r.Offset), max(rg.To, r.Offset+1)
	}
	out := make([]pverify.Range, 0, len(order))
	for _, k := range order {
		out = append(out, *m[k])
	}
	return out
}

// checker is one Check's state.
type checker struct {
	ctx     context.Context
	c       codec.Format
	rep     Report
	byKey   map[string]*kgo.Record // inputs by source
	numbers map[int64]struct{}     // the numbers seen
	ledger  *pverify.Ledger
	order   []placed
}

// placed is an output record with its input and number.
type placed struct {
	src     *kgo.Record
	out     *kgo.Record
	id      int64
	renewed bool
}

// output accounts for one record of the output topic.
func (k *checker) output(o *kgo.Record) {
	rep := &k.rep
	in, src, srcKey, ok := k.source("output", o)
	if !ok {
		return
	}
	at := pverify.Coord{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
	numStr, _ := Header(o, codec.HeaderNumber)
	id, err := strconv.ParseInt(numStr, 10, 64)
	if err != nil {
		k.ledger.Invalid(src, at, "bad number header")
		rep.problem(&rep.Mismatched, "output for %s: number header %q: %v", srcKey, numStr, err)
		return
	}
	k.ledger.Output(src, at, id)
	k.numbers[id] = struct{}{}
	if in == nil {
		return
	}
	renewed, ok := rep.outputRecord(k.ctx, k.c, srcKey, in, o, id)
	if !ok {
		return
	}
	k.order = append(k.order, placed{src: in, out: o, id: id, renewed: renewed})
}

// source finds the input record that r (an output or a dead letter,
// what) came from: nil if its source is no input record. ok is false if
// r has no valid source header (it is then counted as unattributed).
func (k *checker) source(what string, r *kgo.Record) (in *kgo.Record, src pverify.Coord, srcKey string, ok bool) {
	srcKey, _ = Header(r, codec.HeaderSource)
	t, p, off, err := codec.ParseSource(srcKey)
	if err != nil {
		k.ledger.Unattributed(pverify.Coord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, "bad source header")
		if len(k.rep.Problems) < 5 {
			k.rep.Problems = append(k.rep.Problems, fmt.Sprintf("%s %s/%d/%d has source %q, not an input record", what, r.Topic, r.Partition, r.Offset, srcKey))
		}
		return nil, src, srcKey, false
	}
	return k.byKey[srcKey], pverify.Coord{Topic: t, Partition: p, Offset: off}, srcKey, true
}

// deadLetter accounts for one record of the DLQ.
func (k *checker) deadLetter(d *kgo.Record) {
	in, src, srcKey, ok := k.source("dead letter", d)
	if !ok {
		return
	}
	k.ledger.DeadLetter(src, pverify.Coord{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset})
	if in != nil {
		k.rep.deadLetterRecord(srcKey, in, d)
	}
}

// tally takes the fates of the inputs from the ledger: an output naming no
// input record (outside every input's range, or in it but no input) is
// unattributed here, since the test wrote every input.
func (k *checker) tally() {
	rep := &k.rep
	l := k.ledger.Report()
	rep.Lost, rep.Duplicated, rep.Renumbered, rep.Reissued = int(l.Lost), int(l.Duplicated), int(l.Renumbered), int(l.DuplicateNumbers)
	rep.Unattributed = int(l.Unattributed + l.OutsideRange)
	for _, kind := range []struct {
		name   string
		faults []pverify.Fault
	}{{"lost", l.Faults.Lost}, {"duplicated", l.Faults.Duplicated}, {"renumbered", l.Faults.Renumbered},
		{"duplicate number", l.Faults.DuplicateNumbers}, {"unattributed", l.Faults.Unattributed}} {
		for _, f := range kind.faults {
			if len(rep.Problems) < 5 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s %s %v %v %s", kind.name, f.Source, f.Numbers, f.Output, f.Reason))
			}
		}
	}
	if l.OutsideRange > 0 && len(rep.Problems) < 5 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d output or dead-letter records name a source that is no input record", l.OutsideRange))
	}
	rep.Unique = len(k.numbers)
}

// checkOrder: within each input partition, sorted by where the worker
// wrote them, input offsets and new numbers increase.
func (k *checker) checkOrder() {
	rep := &k.rep
	order := k.order
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i].out, order[j].out
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	type tp struct {
		t string
		p int32
	}
	lastOff := map[tp]int64{}
	lastID := map[tp]int64{}
	for _, p := range order {
		k := tp{p.src.Topic, p.src.Partition}
		if off, ok := lastOff[k]; ok && p.src.Offset <= off {
			rep.problem(&rep.OrderViolations, "input %s[%d] offset %d written after offset %d", k.t, k.p, p.src.Offset, off)
		}
		lastOff[k] = p.src.Offset
		if p.renewed {
			if id, ok := lastID[k]; ok && p.id <= id {
				rep.problem(&rep.OrderViolations, "input %s[%d] offset %d got number %d, not above the previous %d", k.t, k.p, p.src.Offset, p.id, id)
			}
			lastID[k] = p.id
		}
	}
}

// outputRecord counts output record o, numbered id, of input in (named
// srcKey) as numbered or passed through, and checks its bytes against what
// f makes of the input and what the worker keeps of the record. renewed says whether o got a new number; ok
// is false if in should not have reached the output at all, or f failed
// (a registry error, counted as a mismatch naming the record).
func (r *Report) outputRecord(ctx context.Context, f codec.Format, srcKey string, in, o *kgo.Record, id int64) (renewed, ok bool) {
	insp, err := f.Inspect(ctx, in.Value)
	if err != nil {
		r.problem(&r.Mismatched, "output for %s: inspect the input: %v", srcKey, err)
		return false, false
	}
	var want []byte
	switch insp.Kind {
	case codec.HasNumber:
		r.Passthrough++
		want = in.Value
		if insp.Number != id {
			r.problem(&r.Mismatched, "passthrough %s: header number %d, value number %d", srcKey, id, insp.Number)
		}
	case codec.NeedsNumber:
		r.Numbered++
		if want, err = f.AppendNumbered(ctx, nil, in.Value, insp, id); err != nil {
			r.problem(&r.Mismatched, "output for %s: number the input: %v", srcKey, err)
			return false, false
		}
	default:
		r.problem(&r.Mismatched, "%s is %s but reached the output", srcKey, insp.Class())
		return false, false
	}
	if !bytes.Equal(o.Value, want) {
		r.problem(&r.Mismatched, "output for %s: value %q, want %q", srcKey, o.Value, want)
	}
	sameRecord(r, srcKey, in, o)
	return insp.Kind == codec.NeedsNumber, true
}

// deadLetterRecord counts dead letter d of input in (named srcKey) and
// checks that it carries the input's bytes unchanged and an error class.
func (r *Report) deadLetterRecord(srcKey string, in, d *kgo.Record) {
	r.DLQ++
	if _, ok := Header(d, codec.HeaderReference); ok {
		r.referenceRecord(srcKey, in, d)
		return
	}
	if !bytes.Equal(d.Value, in.Value) {
		r.problem(&r.Mismatched, "dead letter for %s: bytes changed", srcKey)
	}
	if class, _ := Header(d, codec.HeaderErrorClass); class == "" {
		r.problem(&r.Mismatched, "dead letter for %s has no %s header", srcKey, codec.HeaderErrorClass)
	}
	sameRecord(r, srcKey, in, d)
}

// referenceRecord checks a dead letter that is a reference to its input
// (the input would not fit the DLQ): it names the input, its size, hash
// and first bytes, and carries the class and the input's timestamp.
func (r *Report) referenceRecord(srcKey string, in, d *kgo.Record) {
	ref, err := codec.ParseReference(d.Value)
	switch {
	case err != nil:
		r.problem(&r.Mismatched, "reference for %s: %v", srcKey, err)
	case ref.Source != srcKey || !ref.Matches(in.Value):
		r.problem(&r.Mismatched, "reference for %s names %s or does not match its value", srcKey, ref.Source)
	}
	if class, _ := Header(d, codec.HeaderErrorClass); class == "" || class != string(ref.Class) {
		r.problem(&r.Mismatched, "reference for %s: class header %q, reference class %q", srcKey, class, ref.Class)
	}
	if !in.Timestamp.Equal(d.Timestamp) {
		r.problem(&r.Mismatched, "%s: timestamp %s became %s", srcKey, in.Timestamp, d.Timestamp)
	}
}

// sameRecord checks what the worker keeps: key, timestamp, and the input's
// headers, in order, ahead of the ones it adds.
func sameRecord(rep *Report, srcKey string, in, out *kgo.Record) {
	if !bytes.Equal(in.Key, out.Key) {
		rep.problem(&rep.Mismatched, "%s: key %q became %q", srcKey, in.Key, out.Key)
	}
	if !in.Timestamp.Equal(out.Timestamp) {
		rep.problem(&rep.Mismatched, "%s: timestamp %s became %s", srcKey, in.Timestamp, out.Timestamp)
	}
	if len(out.Headers) < len(in.Headers) {
		rep.problem(&rep.Mismatched, "%s: headers lost", srcKey)
		return
	}
	// The worker renames a header that would pass for one of its own
	// (codec.AppendUntrusted); any other change is a mismatch.
	for i, h := range in.Headers {
		want := h.Key
		if codec.Reserved(want) {
			want = codec.UntrustedPrefix + want
		}
		if out.Headers[i].Key != want || !bytes.Equal(out.Headers[i].Value, h.Value) {
			rep.problem(&rep.Mismatched, "%s: header %d %q changed", srcKey, i, h.Key)
			return
		}
	}
}

// ReadCommitted reads every committed record of topics from the start, as a
// read_committed consumer outside any group, up to the end offsets the
// topics have when it starts (see kread.ReadCommitted), or until ctx ends.
func ReadCommitted(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	return kread.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, topics...)
}

// ReadCommittedWith is ReadCommitted with the client's options (the seed
// brokers, and TLS and SASL for a secured cluster).
func ReadCommittedWith(ctx context.Context, opts []kgo.Opt, topics ...string) ([]*kgo.Record, error) {
	return kread.ReadCommitted(ctx, opts, topics...)
}

// WaitFor polls check every 100ms until it returns true or timeout passes.
func WaitFor(timeout time.Duration, check func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if check() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
