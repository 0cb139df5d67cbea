package verify_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/verify"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// fixture is a worker's finished run on the test Kafka: two input topics
// (one written in transactions, one of them aborted) numbered into one
// output with fewer partitions than the inputs.
type fixture struct {
	e      *pipetest.Env
	inputs []string
	out    string
	dlq    string
	n      int // input records (committed)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	e := pipetest.NewEnv(t, 4)
	f := &fixture{e: e, out: e.Input + ".merged", dlq: e.Input + ".merged.dlq"}
	e.Kafka.CreateTopic(t, f.out, 2)
	e.Kafka.CreateTopic(t, f.dlq, 1)
	e.Produce(t, 3000, orders.Mix{BadPerMille: 10, NumberedPerMille: 20})
	second := e.Kafka.NewTopic(t, 3)
	f.inputs = []string{e.Input, second}
	f.n = len(e.Inputs) + produceTransactional(t, e, second, 1200)
	g := e.Generator(t, 1)
	w, err := pipeline.NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: f.inputs, Group: e.Group, InstanceID: "v", TransactionTimeout: 5 * time.Second, Logger: pipetest.Logger(t)}, pipeline.OutputTopic(f.out), pipeline.DLQTopic(f.dlq), pipeline.Numbers(g), pipeline.Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	run := pipetest.Go(t, "worker", w.Run)
	deadline := time.Now().Add(time.Minute)
	for {
		s := w.Stats()
		if s.In >= int64(f.n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker took %d of %d records in a minute", s.In, f.n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run.Stop(t)
	return f
}

// produceTransactional writes n orders to topic in transactions of 100,
// and one more transaction of 50 that it aborts; it returns n.
func produceTransactional(t *testing.T, e *pipetest.Env, topic string, n int) int {
	t.Helper()
	cl := e.Kafka.Client(t, kgo.TransactionalID(topic+"-producer"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := orders.Records(topic, 3, n+50, orders.Mix{NumberedPerMille: 10}, 150, 1<<41)
	for i := 0; i < len(recs); i += 100 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[i:min(i+100, len(recs))] {
			r.Partition = -1
			cl.Produce(ctx, r, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		commit := kgo.TryCommit
		if i+100 > n {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (f *fixture) run(t *testing.T, mod func(*verify.Config)) verify.Result {
	t.Helper()
	cfg := verify.Config{Brokers: f.e.Kafka.Addrs, Inputs: f.inputs, Output: f.out, DLQ: f.dlq,
		Format: codec.JSONFormat{C: f.e.Codec}, StallTimeout: 20 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := verify.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return res
}

// write produces records to the output as another producer would.
func (f *fixture) write(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	cl := f.e.Kafka.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// copyOf is a copy of a numbered output record, with the number n.
func copyOf(r *kgo.Record, n int64) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if h.Key == codec.HeaderNumber {
			h.Value = []byte(strconv.FormatInt(n, 10))
		}
		c.Headers = append(c.Headers, h)
	}
	return c
}

func number(t *testing.T, r *kgo.Record) int64 {
	t.Helper()
	v, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
	h := string(v)
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		t.Fatalf("output %s/%d/%d: number %q: %v", r.Topic, r.Partition, r.Offset, h, err)
	}
	return n
}

func TestRunCleanRangeIsExact(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, nil)
	c := res.Counts
	if !c.Exact || c.Input != int64(f.n) || c.Numbered+c.Passthrough+c.DeadLettered != c.Input {
		t.Fatalf("%s, want exact over %d inputs", res.Report, f.n)
	}
	if c.DeadLettered != 30 || c.Passthrough != 60+20 {
		t.Fatalf("%s: want 30 dead-lettered and 80 passed through", res.Report)
	}
	// The accounting of the tests agrees with the one that ships.
	outs, err := f.e.ReadTopic(f.out)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(outs)) != c.Numbered+c.Passthrough {
		t.Fatalf("output holds %d records, verify counted %d", len(outs), c.Numbered+c.Passthrough)
	}
	if res.RecordsRead < int64(f.n+len(outs)) {
		t.Fatalf("read %d records, fewer than the %d in input and output", res.RecordsRead, f.n+len(outs))
	}
}

func TestRunCountsFaultsMadeByHand(t *testing.T) {
	f := newFixture(t)
	outs, err := f.e.ReadTopic(f.out)
	if err != nil {
		t.Fatal(err)
	}
	a, b := outs[0], outs[1]
	// An input record no worker saw: lost, until a copy of it names it
	// with another record's number (a number on two sources).
	extra := orders.Records(f.inputs[0], 4, 2, orders.Mix{}, 100, 0)
	for _, r := range extra {
		r.Partition = 0
	}
	f.write(t, extra...)
	res := f.run(t, nil)
	if res.Lost != 2 || res.Exact {
		t.Fatalf("%s: want lost 2", res.Report)
	}
	stray := copyOf(a, number(t, b))
	for i, h := range stray.Headers {
		if h.Key == codec.HeaderSource {
			stray.Headers[i].Value = codec.AppendSource(nil, extra[0].Topic, extra[0].Partition, extra[0].Offset)
		}
	}
	f.write(t, copyOf(a, number(t, a)+1<<50), copyOf(b, number(t, b)), stray,
		&kgo.Record{Topic: f.out, Value: []byte(`{"order_no":"1"}`), Headers: []kgo.RecordHeader{{Key: codec.HeaderSource, Value: []byte("no/such")}}})
	res = f.run(t, nil)
	want := verify.Counts{Lost: 1, Duplicated: 2, Renumbered: 1, DuplicateNumbers: 1, Unattributed: 1}
	got := res.Counts
	if got.Lost != want.Lost || got.Duplicated != want.Duplicated || got.Renumbered != want.Renumbered ||
		got.DuplicateNumbers != want.DuplicateNumbers || got.Unattributed != want.Unattributed || got.Exact {
		t.Fatalf("%s\nwant lost 1, duplicated 2, renumbered 1, duplicate_numbers 1, unattributed 1, not exact", res.Report)
	}
	if r := res.Faults.Renumbered; len(r) != 1 || len(r[0].Numbers) != 2 || r[0].Numbers[1] != number(t, a)+1<<50 {
		t.Fatalf("renumbered examples %+v", r)
	}
}

func TestRunRangeByOffsets(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, func(c *verify.Config) {
		c.Inputs = f.inputs[:1]
		c.From = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 100}}}
		c.To = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 200, 1: 50}}}
	})
	// Partition 0 is [100, 200), 1 is [0, 50), 2 and 3, which neither
	// bound lists, are left out: the outputs of the other offsets are
	// outside the range, not faults.
	if !res.Exact || res.Input != 100+50 || len(res.Ranges) != 2 || res.OutsideRange == 0 {
		t.Fatalf("%s over %d ranges: want exact over 150 inputs of 2 partitions, some outside the range", res.Report, len(res.Ranges))
	}
	// With AllPartitions, 2 and 3 are checked whole.
	res = f.run(t, func(c *verify.Config) {
		c.Inputs = f.inputs[:1]
		c.From = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 100}}}
		c.To = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 200, 1: 50}}}
		c.AllPartitions = true
	})
	if !res.Exact || res.Input != 100+50+750+750 || len(res.Ranges) != 4 {
		t.Fatalf("%s over %d ranges: want exact over 1650 inputs of 4 partitions", res.Report, len(res.Ranges))
	}
	// An end past the last stable offset is clamped, with a note.
	res = f.run(t, func(c *verify.Config) {
		c.Inputs = f.inputs[:1]
		c.To = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 1 << 40}}}
	})
	if !res.Exact || len(res.Notes) != 1 {
		t.Fatalf("%s, notes %q: want exact with one note", res.Report, res.Notes)
	}
}

func TestRunBadInput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	base := verify.Config{Brokers: f.e.Kafka.Addrs, Inputs: f.inputs, Output: f.out, Format: codec.JSONFormat{C: f.e.Codec}}
	for _, tc := range []struct {
		name string
		mod  func(*verify.Config)
		want error
	}{
		{"missing output", func(c *verify.Config) { c.Output = "no-such-topic" }, verify.ErrTopic},
		{"missing input", func(c *verify.Config) { c.Inputs = []string{"no-such-input"} }, verify.ErrTopic},
		{"start after end", func(c *verify.Config) {
			c.From = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 50}}}
			c.To = verify.Bound{Offsets: map[string]map[int32]int64{"": {0: 10}}}
		}, verify.ErrRange},
		{"no such partition", func(c *verify.Config) {
			c.From = verify.Bound{Offsets: map[string]map[int32]int64{"": {9: 0}}}
		}, verify.ErrRange},
		{"output is an input", func(c *verify.Config) { c.Output = f.inputs[0] }, verify.ErrRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			if _, err := verify.Run(ctx, cfg); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// Avro and Protobuf: an input record that already carries a number is told
// apart through the Format, and an output record without a number header is
// read by its value.
func TestRunAvroAndProtobuf(t *testing.T) {
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			e := pipetest.NewEnv(t, 2)
			reg := srfake.New()
			t.Cleanup(reg.Close)
			ctx := context.Background()
			f, err := schema.New(schema.Settings{Format: vf, URL: reg.URL(), OutputTopic: e.Out})
			if err != nil {
				t.Fatal(err)
			}
			id, err := schema.RegisterDemoSchema(ctx, f.Client(), vf, e.Input+"-value")
			if err != nil {
				t.Fatal(err)
			}
			recs := make([]*kgo.Record, 400)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: e.Input, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)),
					Value: schema.AppendDemoOrder(nil, vf, id, i, 1_800_000_000_000)}
			}
			cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			w, err := pipeline.NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "v", TransactionTimeout: 5 * time.Second, Logger: pipetest.Logger(t)}, pipeline.OutputTopic(e.Out), pipeline.DLQTopic(e.DLQ), pipeline.Numbers(e.Generator(t, 1)), pipeline.Codec(e.Codec), pipeline.Format(f))
			if err != nil {
				t.Fatal(err)
			}
			run := pipetest.Go(t, "worker", w.Run)
			for deadline := time.Now().Add(time.Minute); w.Stats().In < int64(len(recs)); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the worker took %d of %d records in a minute", w.Stats().In, len(recs))
				}
			}
			run.Stop(t)
			s := w.Stats()
			cfg := verify.Config{Brokers: e.Kafka.Addrs, Inputs: []string{e.Input}, Output: e.Out, DLQ: e.DLQ, Format: f}
			res, err := verify.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Exact || res.Numbered != s.Numbered || res.Passthrough != s.Passthrough || res.DeadLettered != s.DLQ {
				t.Fatalf("%s; the worker's stats %+v", res.Report, s)
			}
			// The same copies without their number header: verify reads
			// each number from the value.
			outs, err := e.ReadTopic(e.Out)
			if err != nil {
				t.Fatal(err)
			}
			bare := e.Input + ".bare"
			e.Kafka.CreateTopic(t, bare, 2)
			copies := make([]*kgo.Record, len(outs))
			for i, o := range outs {
				hs := slices.DeleteFunc(o.Headers, func(h kgo.RecordHeader) bool { return h.Key == codec.HeaderNumber })
				copies[i] = &kgo.Record{Topic: bare, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: hs}
			}
			if err := cl.ProduceSync(ctx, copies...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg.Output = bare
			if res, err = verify.Run(ctx, cfg); err != nil || !res.Exact || res.Numbered != s.Numbered || res.InvalidNumbers != 0 {
				t.Fatalf("numbers from the value: %s, %v", res.Report, err)
			}
		})
	}
}
