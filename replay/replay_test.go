package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseBound(t *testing.T) {
	cases := []struct {
		in      string
		ok      bool
		edge    string
		offsets map[int32]int64
	}{
		{"start", true, "start", nil},
		{"end", true, "end", nil},
		{"2026-11-29T12:00:00Z", true, "", nil},
		{"0:10,3:7", true, "", map[int32]int64{0: 10, 3: 7}},
		{"0:10,0:11", false, "", nil},
		{"0:-1", false, "", nil},
		{"yesterday", false, "", nil},
		{"", false, "", nil},
	}
	for _, c := range cases {
		b, err := ParseBound(c.in)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBound)) {
			t.Errorf("ParseBound(%q) = %v", c.in, err)
			continue
		}
		if c.ok && (b.Edge != c.edge || len(b.Offsets) != len(c.offsets)) {
			t.Errorf("ParseBound(%q) = %+v", c.in, b)
		}
		for p, o := range c.offsets {
			if b.Offsets[p] != o {
				t.Errorf("ParseBound(%q) partition %d = %d, want %d", c.in, p, b.Offsets[p], o)
			}
		}
	}
}

// replayInto runs one replay of the env's input into output and returns what
// it wrote.
func replayInto(t *testing.T, e *pipetest.Env, output string, from, to string, idem *pipeline.Idempotency, opts ...pipeline.Opt) []*kgo.Record {
	t.Helper()
	e.Kafka.CreateTopic(t, output, e.Partitions)
	e.Kafka.CreateTopic(t, output+".dlq", e.Partitions)
	fb, err := ParseBound(from)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ParseBound(to)
	if err != nil {
		t.Fatal(err)
	}
	worker := append([]pipeline.Opt{pipeline.Numbers(e.Generator(t, 2)), pipeline.Codec(e.Codec), pipeline.DLQTopic(output + ".dlq")}, opts...)
	if idem != nil {
		worker = append(worker, pipeline.WithIdempotency(idem))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := Run(ctx, Config{Loop: eos.Config{Brokers: e.Kafka.Addrs, TransactionTimeout: 5 * time.Second, Logger: pipetest.Logger(t)}, Input: e.Input, Output: output, From: fb, To: tb,
		Redis: e.Redis.Client(t), RedisPrefix: e.Prefix, Worker: worker}); err != nil {
		t.Fatalf("replay into %s: %v", output, err)
	}
	out, err := e.ReadTopic(output)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Replaying the same range twice into two topics, with the order reference
// as the idempotency key, gives every order the same number in both.
func TestReplayTwiceWithKeyGivesSameNumbers(t *testing.T) {
	e := pipetest.NewEnv(t, 3)
	e.Produce(t, 3000, orders.Mix{NumberedPerMille: 20})
	idem := &pipeline.Idempotency{Store: e.KeyStore(t), Field: "order_ref"}
	first := pipetest.NumbersByRef(t, replayInto(t, e, e.Input+".r1", "start", "end", idem))
	second := pipetest.NumbersByRef(t, replayInto(t, e, e.Input+".r2", "start", "end", idem))
	if len(first) != 3000 || len(second) != 3000 {
		t.Fatalf("replays wrote %d and %d orders, want 3000 each", len(first), len(second))
	}
	for ref, n := range first {
		if second[ref] != n {
			t.Fatalf("order %s: %s in the first replay, %s in the second", ref, n, second[ref])
		}
	}
}

// Without a key every record gets a new, unique number, numbered records
// keep theirs, and the replay is exactly once.
func TestReplayWithoutKey(t *testing.T) {
	e := pipetest.NewEnv(t, 3)
	e.Produce(t, 3000, orders.Mix{NumberedPerMille: 20, BadPerMille: 10})
	out := replayInto(t, e, e.Input+".r1", "start", "end", nil)
	dlq, err := e.ReadTopic(e.Input + ".r1.dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := accounting.Check(e.Codec, e.Inputs, out, dlq)
	pipetest.RequireExactlyOnce(t, rep)
	again := replayInto(t, e, e.Input+".r2", "start", "end", nil)
	a, b := pipetest.NumbersByRef(t, out), pipetest.NumbersByRef(t, again)
	renumbered := 0
	for ref, n := range a {
		if b[ref] != n {
			renumbered++
		}
	}
	if renumbered != rep.Numbered {
		t.Fatalf("%d orders got a new number in the second replay, want the %d unnumbered ones", renumbered, rep.Numbered)
	}
}

// A range given by partition offsets replays exactly those records; one
// given again resumes (nothing left to do) instead of starting over.
func TestReplayOffsetRangeAndRerun(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	e.Produce(t, 1000, orders.Mix{})
	out := replayInto(t, e, e.Input+".r", "0:100,1:200", "0:300,1:250", nil)
	want := 200 + 50
	if len(out) != want {
		t.Fatalf("replayed %d records, want %d", len(out), want)
	}
	for _, r := range out {
		src, _ := accounting.Header(r, codec.HeaderSource)
		_, p, o, _ := codec.ParseSource(src)
		if (p == 0 && (o < 100 || o >= 300)) || (p == 1 && (o < 200 || o >= 250)) {
			t.Fatalf("record %s outside the range", src)
		}
	}
	if again := replayInto(t, e, e.Input+".r", "0:100,1:200", "0:300,1:250", nil); len(again) != want {
		t.Fatalf("a rerun of a finished replay wrote more: %d records", len(again))
	}
}

// The input's last offsets are transaction markers (it was written by a
// transactional producer): the replay still sees the end of the range and
// exits.
func TestReplayEndsOnTransactionMarkers(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	cl := e.Kafka.Client(t, kgo.TransactionalID(e.Input+"-producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := orders.Records(e.Input, 2, 500, orders.Mix{}, 200, 0)
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	e.Inputs = recs
	done := make(chan []*kgo.Record, 1)
	go func() { done <- replayInto(t, e, e.Input+".r", "start", "end", nil) }()
	select {
	case out := <-done:
		if len(out) != 500 {
			t.Fatalf("replayed %d of 500", len(out))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replay did not finish: it never saw past the commit markers")
	}
}

// With offset bounds, a partition that neither bound lists is not
// replayed; AllPartitions replays it whole, under another ID. Resolve
// reports the same plan and stores nothing.
func TestReplayListedPartitionsOnly(t *testing.T) {
	e := pipetest.NewEnv(t, 3)
	e.Produce(t, 900, orders.Mix{})
	from, _ := ParseBound("0:10,1:20")
	to, _ := ParseBound("0:60")
	rc := Config{Loop: eos.Config{Brokers: e.Kafka.Addrs}, Input: e.Input, Output: e.Input + ".r", From: from, To: to,
		Redis: e.Redis.Client(t), RedisPrefix: e.Prefix}
	all := rc
	all.AllPartitions = true
	if ID(rc) == ID(all) {
		t.Fatal("--all-partitions does not change the replay's ID, so the two would share stored ranges")
	}
	plan, err := Resolve(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Partitions) != 2 || plan.Partitions[0].Range != (Range{From: 10, To: 60}) || plan.Partitions[1].From != 20 ||
		len(plan.Left) != 1 || plan.Left[0] != 2 || plan.Stored {
		t.Fatalf("plan %+v: want partitions 0 [10, 60) and 1 from 20, 2 left out, nothing stored", plan)
	}
	if n, err := e.Redis.Client(t).Exists(context.Background(), idgen.ReplayKey(e.Prefix, plan.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("Resolve stored the ranges (%d, %v): a dry run must change nothing", n, err)
	}
	out := replayInto(t, e, e.Input+".r", "0:10,1:20", "0:60", nil)
	want := 50 + plan.Partitions[1].Offsets()
	if int64(len(out)) != want {
		t.Fatalf("replayed %d records, want %d", len(out), want)
	}
	for _, r := range out {
		src, _ := accounting.Header(r, codec.HeaderSource)
		if _, p, _, _ := codec.ParseSource(src); p == 2 {
			t.Fatalf("record %s of partition 2, which no bound lists", src)
		}
	}
	if plan, err = Resolve(context.Background(), rc); err != nil || !plan.Stored {
		t.Fatalf("after the replay, Resolve: stored %t, %v; want the stored ranges", plan.Stored, err)
	}
}
