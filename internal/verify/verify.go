// Package verify does the exact accounting of a run: every input record
// must appear exactly once in the output or the dead-letter topic (read
// read_committed), byte for byte as the worker promises, with unique numbers,
// and with each input partition's order kept. Tests, the fault suite and the
// demo all count with it, so they all mean the same thing by "lost" and
// "duplicated".
package verify

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kadm"
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
	Unique      int // distinct numbers in the output
	Reissued    int // numbers carried by more than one distinct input record
	// Faults in what was written, each with up to 5 examples in Problems.
	Mismatched      int // output bytes, key, headers or timestamp not as promised
	OrderViolations int // an input partition's records out of order, or numbers not increasing
	Unattributed    int // output records without a valid source header
	// Unchecked counts numbers a Stream could not check for uniqueness
	// (older than its window); Check checks every number.
	Unchecked int
	Problems  []string
}

// OK reports whether the run was exactly once and as promised.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Reissued == 0 && r.Mismatched == 0 &&
		r.OrderViolations == 0 && r.Unattributed == 0 && r.Unchecked == 0 && r.In == r.Numbered+r.Passthrough+r.DLQ
}

func (r Report) String() string {
	s := fmt.Sprintf("in=%d numbered=%d passthrough=%d dlq=%d lost=%d duplicated=%d unique_numbers=%d reissued=%d mismatched=%d order_violations=%d unattributed=%d",
		r.In, r.Numbered, r.Passthrough, r.DLQ, r.Lost, r.Duplicated, r.Unique, r.Reissued, r.Mismatched, r.OrderViolations, r.Unattributed)
	if r.Unchecked > 0 {
		s += fmt.Sprintf(" unchecked=%d", r.Unchecked)
	}
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
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value), true
		}
	}
	return "", false
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
func CheckFormat(ctx context.Context, f codec.Format, inputs, outputs, dlq []*kgo.Record) Report {
	k := &checker{ctx: ctx, c: f, rep: Report{In: len(inputs)}, byKey: make(map[string]*kgo.Record, len(inputs)),
		seen: make(map[string]int, len(inputs)), numbers: make(map[int64]string, len(outputs))}
	for _, r := range inputs {
		k.byKey[string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))] = r
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

// checker is one Check's state.
type checker struct {
	ctx     context.Context
	c       codec.Format
	rep     Report
	byKey   map[string]*kgo.Record // inputs by source
	seen    map[string]int         // how often each input came out
	numbers map[int64]string       // each number's input
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
	in, srcKey := k.source("output", o)
	if in == nil {
		return
	}
	numStr, _ := Header(o, codec.HeaderNumber)
	id, err := strconv.ParseInt(numStr, 10, 64)
	if err != nil {
		rep.problem(&rep.Mismatched, "output for %s: number header %q: %v", srcKey, numStr, err)
		return
	}
	if prev, dup := k.numbers[id]; dup && prev != srcKey {
		rep.problem(&rep.Reissued, "number %d given to %s and %s", id, prev, srcKey)
	}
	k.numbers[id] = srcKey
	renewed, ok := rep.outputRecord(k.ctx, k.c, srcKey, in, o, id)
	if !ok {
		return
	}
	k.order = append(k.order, placed{src: in, out: o, id: id, renewed: renewed})
}

// source finds the input record that r (an output or a dead letter,
// what) came from and counts it as seen; nil if r names no input.
func (k *checker) source(what string, r *kgo.Record) (*kgo.Record, string) {
	srcKey, _ := Header(r, codec.HeaderSource)
	in, ok := k.byKey[srcKey]
	if !ok {
		k.rep.problem(&k.rep.Unattributed, "%s %s/%d/%d has source %q, not an input record", what, r.Topic, r.Partition, r.Offset, srcKey)
		return nil, srcKey
	}
	k.seen[srcKey]++
	return in, srcKey
}

// deadLetter accounts for one record of the DLQ.
func (k *checker) deadLetter(d *kgo.Record) {
	rep := &k.rep
	in, srcKey := k.source("dead letter", d)
	if in == nil {
		return
	}
	rep.deadLetterRecord(srcKey, in, d)
}

// tally counts the inputs lost and duplicated.
func (k *checker) tally() {
	rep := &k.rep
	for key := range k.byKey {
		switch n := k.seen[key]; {
		case n == 0:
			rep.Lost++
			if len(rep.Problems) < 5 {
				rep.Problems = append(rep.Problems, "lost "+key)
			}
		case n > 1:
			var extra int
			rep.problem(&extra, "%s appears %d times", key, n)
			rep.Duplicated += n - 1
		}
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

// numberer is what outputRecord needs of the worker's value format:
// codec.Format, or a Stream's Numberer through plainNumberer.
type numberer interface {
	Inspect(ctx context.Context, value []byte) (codec.Inspection, error)
	AppendNumbered(ctx context.Context, dst, value []byte, insp codec.Inspection, id int64) ([]byte, error)
}

// outputRecord counts output record o, numbered id, of input in (named
// srcKey) as numbered or passed through, and checks its bytes against what
// f makes of the input and what the worker keeps of the record. Check and
// Stream both account with it. renewed says whether o got a new number; ok
// is false if in should not have reached the output at all, or f failed
// (a registry error, counted as a mismatch naming the record).
func (r *Report) outputRecord(ctx context.Context, f numberer, srcKey string, in, o *kgo.Record, id int64) (renewed, ok bool) {
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
// Check and Stream both account with it.
func (r *Report) deadLetterRecord(srcKey string, in, d *kgo.Record) {
	r.DLQ++
	if !bytes.Equal(d.Value, in.Value) {
		r.problem(&r.Mismatched, "dead letter for %s: bytes changed", srcKey)
	}
	if class, _ := Header(d, codec.HeaderErrorClass); class == "" {
		r.problem(&r.Mismatched, "dead letter for %s has no %s header", srcKey, codec.HeaderErrorClass)
	}
	sameRecord(r, srcKey, in, d)
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
	for i, h := range in.Headers {
		if out.Headers[i].Key != h.Key || !bytes.Equal(out.Headers[i].Value, h.Value) {
			rep.problem(&rep.Mismatched, "%s: header %d %q changed", srcKey, i, h.Key)
			return
		}
	}
}

// ReadCommitted reads every committed record of topics from the start, as a
// read_committed consumer outside any group, up to the end offsets the
// topics have when it starts (an open transaction holds it until it ends),
// or until ctx ends.
func ReadCommitted(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	// Control records (transaction markers) are kept so that the reader
	// sees its position reach the end offset even when the last offsets of
	// a partition are markers, which consumers never see as data.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %v: %w", topics, err)
	}
	left := map[string]map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			if left[o.Topic] == nil {
				left[o.Topic] = map[int32]int64{}
			}
			left[o.Topic][o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for !reached(left) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %v: %w (have %d records, partitions left %v)", topics, ctx.Err(), len(out), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
				delete(left[r.Topic], r.Partition)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out, nil
}

func reached(ends map[string]map[int32]int64) bool {
	for _, m := range ends {
		if len(m) > 0 {
			return false
		}
	}
	return true
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
