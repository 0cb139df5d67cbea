package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/verify"
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

// replay runs one replay of the env's input into output and returns what
// it wrote.
func (e *env) replay(t *testing.T, output string, from, to string, idem *Idempotency, opts ...Opt) []*kgo.Record {
	t.Helper()
	e.kafka.CreateTopic(t, output, e.partitions)
	e.kafka.CreateTopic(t, output+".dlq", e.partitions)
	fb, err := ParseBound(from)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ParseBound(to)
	if err != nil {
		t.Fatal(err)
	}
	worker := append([]Opt{Numbers(e.generator(t, 2)), Codec(e.codec), DLQTopic(output + ".dlq"),
		Logger(testLogger(t)), TransactionTimeout(5 * time.Second)}, opts...)
	if idem != nil {
		worker = append(worker, WithIdempotency(idem))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := Replay(ctx, ReplayConfig{Brokers: e.kafka.Addrs, Input: e.input, Output: output, From: fb, To: tb,
		Redis: e.redis.Client(t), RedisPrefix: e.prefix, Worker: worker}); err != nil {
		t.Fatalf("replay into %s: %v", output, err)
	}
	out, err := readTopic(e, output)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) keyStore(t *testing.T) *idgen.KeyStore {
	t.Helper()
	s, err := idgen.NewKeyStore(e.redis.Client(t), e.prefix, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// numbersByRef maps each order_ref in records to its number header.
func numbersByRef(t *testing.T, recs []*kgo.Record) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range recs {
		ref, ok, err := codec.Field(r.Value, "order_ref")
		if err != nil || !ok {
			t.Fatalf("output without order_ref: %s", r.Value)
		}
		num, _ := verify.Header(r, codec.HeaderNumber)
		if prev, dup := m[string(ref)]; dup && prev != num {
			t.Fatalf("order %s has numbers %s and %s in one topic", ref, prev, num)
		}
		m[string(ref)] = num
	}
	return m
}

// Replaying the same range twice into two topics, with the order reference
// as the idempotency key, gives every order the same number in both.
func TestReplayTwiceWithKeyGivesSameNumbers(t *testing.T) {
	e := newEnv(t, 3)
	e.produce(t, 3000, orders.Mix{NumberedPerMille: 20})
	idem := &Idempotency{Store: e.keyStore(t), Field: "order_ref"}
	first := numbersByRef(t, e.replay(t, e.input+".r1", "start", "end", idem))
	second := numbersByRef(t, e.replay(t, e.input+".r2", "start", "end", idem))
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
	e := newEnv(t, 3)
	e.produce(t, 3000, orders.Mix{NumberedPerMille: 20, BadPerMille: 10})
	out := e.replay(t, e.input+".r1", "start", "end", nil)
	dlq, err := readTopic(e, e.input+".r1.dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Check(e.codec, e.inputs, out, dlq)
	requireExactlyOnce(t, rep)
	again := e.replay(t, e.input+".r2", "start", "end", nil)
	a, b := numbersByRef(t, out), numbersByRef(t, again)
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
	e := newEnv(t, 2)
	e.produce(t, 1000, orders.Mix{})
	out := e.replay(t, e.input+".r", "0:100,1:200", "0:300,1:250", nil)
	want := 200 + 50
	if len(out) != want {
		t.Fatalf("replayed %d records, want %d", len(out), want)
	}
	for _, r := range out {
		src, _ := verify.Header(r, codec.HeaderSource)
		_, p, o, _ := codec.ParseSource(src)
		if (p == 0 && (o < 100 || o >= 300)) || (p == 1 && (o < 200 || o >= 250)) {
			t.Fatalf("record %s outside the range", src)
		}
	}
	if again := e.replay(t, e.input+".r", "0:100,1:200", "0:300,1:250", nil); len(again) != want {
		t.Fatalf("a rerun of a finished replay wrote more: %d records", len(again))
	}
}

// The input's last offsets are transaction markers (it was written by a
// transactional producer): the replay still sees the end of the range and
// exits.
func TestReplayEndsOnTransactionMarkers(t *testing.T) {
	e := newEnv(t, 2)
	cl := e.kafka.Client(t, kgo.TransactionalID(e.input+"-producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := orders.Records(e.input, 2, 500, orders.Mix{}, 200, 0)
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
	e.inputs = recs
	done := make(chan []*kgo.Record, 1)
	go func() { done <- e.replay(t, e.input+".r", "start", "end", nil) }()
	select {
	case out := <-done:
		if len(out) != 500 {
			t.Fatalf("replayed %d of 500", len(out))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replay did not finish: it never saw past the commit markers")
	}
}

// Two workers meet the same order references at the same moment (two input
// topics with the same orders): each order gets one number, and both emit it.
func TestIdempotencyConcurrentWorkers(t *testing.T) {
	e := newEnv(t, 2)
	e.produce(t, 2000, orders.Mix{})
	other := newEnvOn(t, e)
	other.produce(t, 2000, orders.Mix{})
	idem := &Idempotency{Store: e.keyStore(t), Field: "order_ref"}
	a := e.start(t, "a", WithIdempotency(idem))
	b := other.start(t, "b", WithIdempotency(idem))
	ra, rb := e.waitOutput(t, 60*time.Second), other.waitOutput(t, 60*time.Second)
	if ra.Lost+rb.Lost != 0 {
		t.Fatalf("lost records: %s / %s", ra, rb)
	}
	outA, _ := readTopic(e, e.out)
	outB, _ := readTopic(other, other.out)
	na, nb := numbersByRef(t, outA), numbersByRef(t, outB)
	for ref, n := range na {
		if nb[ref] != n {
			t.Fatalf("order %s: %s from one worker, %s from the other", ref, n, nb[ref])
		}
	}
	sa, sb := a.w.Stats(), b.w.Stats()
	if sa.Repeats+sb.Repeats != 2000 {
		t.Fatalf("repeats %d + %d, want 2000 (every order once)", sa.Repeats, sb.Repeats)
	}
	repeatHeaders := 0
	for _, r := range append(outA, outB...) {
		if v, _ := verify.Header(r, codec.HeaderRepeat); v == "true" {
			repeatHeaders++
		}
	}
	if repeatHeaders != 2000 {
		t.Fatalf("%d records carry %s: true, want 2000", repeatHeaders, codec.HeaderRepeat)
	}
}

// newEnvOn is a second input topic, with its own output, on e's Kafka and
// Redis.
func newEnvOn(t *testing.T, e *env) *env {
	t.Helper()
	o := *e
	o.inputs = nil
	o.input = e.kafka.NewTopic(t, e.partitions)
	o.out, o.dlq, o.group = o.input+".out", o.input+".dlq", o.input+"-g"
	e.kafka.CreateTopic(t, o.out, e.partitions)
	e.kafka.CreateTopic(t, o.dlq, e.partitions)
	return &o
}

// A record without the key field goes to the DLQ as missing_key, or with
// Optional is numbered like any other. With Drop, repeats are counted and
// not written.
func TestIdempotencyMissingKeyAndDrop(t *testing.T) {
	e := newEnv(t, 1)
	recs := orders.Records(e.input, 1, 10, orders.Mix{}, 200, 0)
	recs[3].Value = []byte(`{"customer":"C-1","amount":"1.00"}`)
	recs[7].Value = append([]byte(nil), recs[2].Value...) // order 2 again
	cl := e.kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.inputs = recs
	store := e.keyStore(t)

	strict := e.start(t, "strict", WithIdempotency(&Idempotency{Store: store, Field: "order_ref", Drop: true}))
	if !verify.WaitFor(30*time.Second, func() bool { return strict.w.Stats().In == 10 }) {
		t.Fatalf("stats %+v", strict.w.Stats())
	}
	strict.stop(t)
	s := strict.w.Stats()
	if s.DLQ != 1 || s.Dropped != 1 || s.Repeats != 1 || s.Numbered != 8 || s.In != s.Numbered+s.Passthrough+s.DLQ+s.Dropped {
		t.Fatalf("strict stats %+v: want 1 missing_key, 1 dropped repeat, 8 numbered", s)
	}
	dlq, _ := readTopic(e, e.dlq)
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters", len(dlq))
	}
	if class, _ := verify.Header(dlq[0], codec.HeaderErrorClass); class != string(codec.ClassMissingKey) {
		t.Fatalf("class %q", class)
	}

	e.group += "-optional"
	e.out = e.input + ".opt"
	e.kafka.CreateTopic(t, e.out, 1)
	lax := e.start(t, "lax", WithIdempotency(&Idempotency{Store: store, Field: "order_ref", Optional: true}))
	if !verify.WaitFor(30*time.Second, func() bool { return lax.w.Stats().In == 10 }) {
		t.Fatalf("stats %+v", lax.w.Stats())
	}
	lax.stop(t)
	if s := lax.w.Stats(); s.DLQ != 0 || s.Numbered != 10 || s.Repeats != 9 {
		t.Fatalf("optional stats %+v: want all 10 numbered, 9 of them repeats of the first run", s)
	}
}

func TestParseIdempotencyKey(t *testing.T) {
	for in, want := range map[string]string{"key": "", "field:order_ref": "order_ref"} {
		if got, err := ParseIdempotencyKey(in); err != nil || got != want {
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "field:", "ref", "header:x"} {
		if _, err := ParseIdempotencyKey(bad); !errors.Is(err, ErrIdempotencyKey) {
			t.Errorf("ParseIdempotencyKey(%q) = %v", bad, err)
		}
	}
	if _, err := ParseOnRepeat("skip"); !errors.Is(err, ErrIdempotencyKey) || !strings.Contains(err.Error(), "emit or drop") {
		t.Errorf("ParseOnRepeat(skip) = %v", err)
	}
}
