package accounting

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/twmb/franz-go/pkg/kgo"
)

// feedStream feeds a run to a new Stream: inputs first or last, outputs
// in the order of their partitions, as a consumer reads them.
func feedStream(c *codec.Codec, inputsFirst bool, in, out, dlq []*kgo.Record) Report {
	s := NewStream(c, idgen.DefaultLayout(), time.Hour)
	if inputsFirst {
		s.Input(in...)
	}
	out = slices.Clone(out)
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	for _, o := range out {
		s.Output(o)
	}
	for _, d := range dlq {
		s.DeadLetter(d)
	}
	if !inputsFirst {
		s.Input(in...)
	}
	return s.Report()
}

// A correct run is exact whether the inputs are fed before or after their
// outputs, and the Stream then holds nothing.
func TestStreamAcceptsACorrectRun(t *testing.T) {
	for _, first := range []bool{true, false} {
		c, in, out, dlq := fixture(t)
		rep := feedStream(c, first, in, out, dlq)
		if !rep.OK() || rep.Numbered != 2 || rep.DLQ != 1 || rep.Unique != 2 {
			t.Fatalf("inputs first %v: %s", first, rep)
		}
	}
}

// The Stream catches each fault Check catches, in either feeding order.
func TestStreamCatchesFaults(t *testing.T) {
	for _, tc := range faults {
		for _, first := range []bool{true, false} {
			t.Run(tc.name+"/inputs first "+strconv.FormatBool(first), func(t *testing.T) {
				c, in, out, dlq := fixture(t)
				out, dlq = tc.mutate(in, out, dlq)
				rep := feedStream(c, first, in, out, dlq)
				if rep.OK() || tc.field(rep) == 0 {
					t.Fatalf("fault not caught: %s", rep)
				}
			})
		}
	}
}

// An hour of a steady stream (simulated: 360,000 records, ten a second of
// number time) keeps a window's worth of numbers and nothing in flight,
// and a number reissued within the window is still caught. A number
// older than the window is counted unchecked, never passed.
func TestStreamHoldsAWindowNotTheRun(t *testing.T) {
	c, err := codec.New(codec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := idgen.DefaultLayout()
	window := time.Minute
	s := NewStream(c, l, window)
	start := time.Now().Add(-2 * time.Hour)
	const n, perSec = 360000, 10
	var prevID int64
	out := func(in *kgo.Record, id int64, off int64) *kgo.Record {
		insp := c.Inspect(in.Value)
		return &kgo.Record{Topic: "out", Partition: in.Partition, Offset: off, Key: in.Key, Timestamp: in.Timestamp,
			Value: c.AppendNumbered(nil, in.Value, insp, id),
			Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(strconv.FormatInt(id, 10))},
				{Key: codec.HeaderSource, Value: codec.AppendSource(nil, in.Topic, in.Partition, in.Offset)}}}
	}
	for i := range n {
		ms := start.Add(time.Duration(i) * time.Second / perSec).UnixMilli()
		id, err := l.Compose(ms, 1, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		in := &kgo.Record{Topic: "in", Partition: int32(i % 4), Offset: int64(i / 4), Value: []byte(`{"i":` + strconv.Itoa(i) + `}`), Timestamp: time.UnixMilli(ms)}
		s.Input(in)
		if i == n-1 {
			id = prevID // the last number again: reissued
		}
		s.Output(out(in, id, int64(i/4)))
		prevID = id
	}
	now, most := s.Held()
	if now.Pending != 0 || now.Early != 0 || now.OutOfOrder != 0 {
		t.Fatalf("holds %+v after every record came out", now)
	}
	if limit := int(window.Seconds()*perSec) + 2; most.Numbers > limit {
		t.Fatalf("held up to %d numbers, want at most a window's %d", most.Numbers, limit)
	}
	rep := s.Report()
	if rep.Reissued != 1 || rep.In != n || rep.Numbered != n || rep.Unchecked != 0 {
		t.Fatalf("report %s", rep)
	}

	// A number from before the window: unchecked, and not OK.
	old, _ := l.Compose(start.UnixMilli(), 1, 1, 0)
	in := &kgo.Record{Topic: "in", Partition: 0, Offset: n / 4, Value: []byte(`{}`), Timestamp: start}
	s.Input(in)
	s.Output(out(in, old, n/4))
	if rep := s.Report(); rep.Unchecked != 1 || rep.OK() {
		t.Fatalf("a number older than the window: %s", rep)
	}
}
