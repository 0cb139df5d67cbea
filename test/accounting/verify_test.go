package accounting

import (
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fixture is three input records on one partition and the output a correct
// worker writes for them: two numbered, one dead-lettered.
func fixture(t *testing.T) (c *codec.Codec, in, out, dlq []*kgo.Record) {
	t.Helper()
	c, err := codec.New(codec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1700000000000)
	for i, v := range []string{`{"a":1}`, `{"a":2}`, `not json`} {
		in = append(in, &kgo.Record{Topic: "in", Partition: 0, Offset: int64(i), Key: []byte("k"), Value: []byte(v), Timestamp: ts})
	}
	for i, r := range in[:2] {
		id := int64(100 + i)
		insp := c.Inspect(r.Value)
		out = append(out, &kgo.Record{Topic: "out", Partition: 0, Offset: int64(i), Key: r.Key, Timestamp: ts,
			Value: c.AppendNumbered(nil, r.Value, insp, id),
			Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(strconv.FormatInt(id, 10))},
				{Key: codec.HeaderSource, Value: codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)}}})
	}
	dlq = []*kgo.Record{{Topic: "in.dlq", Key: in[2].Key, Value: in[2].Value, Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: codec.HeaderErrorClass, Value: []byte("not_json")},
			{Key: codec.HeaderSource, Value: []byte("in/0/2")}}}}
	return c, in, out, dlq
}

func TestCheckAcceptsACorrectRun(t *testing.T) {
	c, in, out, dlq := fixture(t)
	rep := Check(c, in, out, dlq)
	if !rep.OK() || rep.Numbered != 2 || rep.DLQ != 1 || rep.Unique != 2 {
		t.Fatalf("a correct run: %s", rep)
	}
}

// fault is one kind of fault the accounting exists for: mutate spoils a
// correct run, field is the Report counter that must catch it.
type fault struct {
	name   string
	mutate func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record)
	field  func(Report) int
}

// faults are the faults Check must catch.
var faults = []fault{
	{"lost", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) { return out[:1], dlq },
		func(r Report) int { return r.Lost }},
	{"lost dead letter", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) { return out, nil },
		func(r Report) int { return r.Lost }},
	{"duplicated", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) { return append(out, out[1]), dlq },
		func(r Report) int { return r.Duplicated }},
	{"duplicated dead letter", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) { return out, append(dlq, dlq[0]) },
		func(r Report) int { return r.Duplicated }},
	{"reissued", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[1].Headers[0].Value = []byte("100")
		out[1].Value = []byte(`{"a":2,"order_no":"100"}`)
		return out, dlq
	}, func(r Report) int { return r.Reissued }},
	{"bytes changed", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[0].Value = []byte(`{"a": 1,"order_no":"100"}`)
		return out, dlq
	}, func(r Report) int { return r.Mismatched }},
	{"dead letter changed", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		dlq[0].Value = []byte("not json!")
		return out, dlq
	}, func(r Report) int { return r.Mismatched }},
	{"key changed", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[0].Key = []byte("other")
		return out, dlq
	}, func(r Report) int { return r.Mismatched }},
	{"timestamp changed", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[1].Timestamp = out[1].Timestamp.Add(time.Millisecond)
		return out, dlq
	}, func(r Report) int { return r.Mismatched }},
	{"out of order", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[0].Offset, out[1].Offset = 1, 0
		return out, dlq
	}, func(r Report) int { return r.OrderViolations }},
	{"unattributed", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[0].Headers[1].Value = []byte("elsewhere/0/0")
		return out, dlq
	}, func(r Report) int { return r.Unattributed }},
	{"no source", func(in, out, dlq []*kgo.Record) ([]*kgo.Record, []*kgo.Record) {
		out[0].Headers = out[0].Headers[:1]
		return out, dlq
	}, func(r Report) int { return r.Unattributed }},
}

// Each kind of fault the accounting exists for is caught.
func TestCheckCatchesFaults(t *testing.T) {
	for _, tc := range faults {
		t.Run(tc.name, func(t *testing.T) {
			c, in, out, dlq := fixture(t)
			out, dlq = tc.mutate(in, out, dlq)
			rep := Check(c, in, out, dlq)
			if rep.OK() || tc.field(rep) == 0 {
				t.Fatalf("fault not caught: %s", rep)
			}
		})
	}
}
