package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// prefilled is one input of the trust tests: its value, headers, and what
// the worker must do with it.
type prefilled struct {
	value   string
	headers []kgo.RecordHeader
	class   codec.Class // the class it is rejected for; "" passes or is numbered
	pass    bool        // passed through with its own number
}

// compose is a number of the default layout, failing the test on a bad part.
func compose(t *testing.T, at time.Time, server, worker, seq int64) int64 {
	t.Helper()
	n, err := idgen.DefaultLayout().Compose(at.UnixMilli(), server, worker, seq)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// forged are headers named like the worker's own, as a producer upstream
// might set them to pass a record off as numbered.
var forged = []kgo.RecordHeader{
	{Key: codec.HeaderNumber, Value: []byte("1")},
	{Key: codec.HeaderSource, Value: []byte("orders/0/0")},
	{Key: "Flakestream-Error-Class", Value: []byte("none")},
	{Key: "trace", Value: []byte("t-1")},
}

func trustInputs(t *testing.T) []prefilled {
	now := time.Now()
	order := func(i int, num int64) string {
		if num < 0 {
			return fmt.Sprintf(`{"order_ref":"ORD-%d"}`, i)
		}
		return fmt.Sprintf(`{"order_ref":"ORD-%d","order_no":"%d"}`, i, num)
	}
	return []prefilled{
		{value: order(0, compose(t, now.Add(-time.Minute), 1, 1, 7)), pass: true},
		{value: order(1, compose(t, now.Add(-time.Minute), 9, 1, 7)), class: codec.ClassUnknownServer},
		{value: order(2, compose(t, now.Add(-time.Minute), 1, 9, 7)), class: codec.ClassUnknownWorker},
		{value: order(3, compose(t, now.Add(time.Hour), 1, 1, 7)), class: codec.ClassFutureNumber},
		{value: order(4, -1), headers: forged},
		{value: order(5, compose(t, now.Add(-time.Minute), 9, 1, 8)), headers: forged, class: codec.ClassUnknownServer},
		{value: `{"order_ref":"ORD-6","order_no":"-5"}`, class: codec.ClassInvalidNumber},
	}
}

// produceAll writes the inputs to partition 0 of e's input topic, in order.
func produceAll(t *testing.T, e *pipetest.Env, in []prefilled) {
	t.Helper()
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, p := range in {
		r := &kgo.Record{Topic: e.Input, Value: []byte(p.value), Headers: p.headers}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		e.Inputs = append(e.Inputs, r)
	}
}

// runUntil runs a worker until it has committed n records and returns its
// output and dead letters.
func runUntil(t *testing.T, e *pipetest.Env, n int, opts ...Opt) (out, dlq []*kgo.Record, s Stats) {
	t.Helper()
	wk := start(t, e, "a", opts...)
	if !accounting.WaitFor(60*time.Second, func() bool { return wk.w.Stats().In == int64(n) }) {
		t.Fatalf("stats %+v, want %d records in", wk.w.Stats(), n)
	}
	wk.stop(t)
	out, err := e.ReadTopic(e.Out)
	if err == nil {
		dlq, err = e.ReadTopic(e.DLQ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out, dlq, wk.w.Stats()
}

// requireOwnHeaders fails unless r carries exactly one header of each name
// in own, and every forged input header renamed, with its value.
func requireOwnHeaders(t *testing.T, r *kgo.Record, own ...string) {
	t.Helper()
	count := map[string]int{}
	for _, h := range r.Headers {
		count[h.Key]++
	}
	for _, k := range own {
		if count[k] != 1 {
			t.Errorf("record %s: %d headers %q, want exactly 1 (headers %v)", r.Value, count[k], k, r.Headers)
		}
	}
	if _, ok := codec.LastHeader(r.Headers, "trace"); !ok {
		return // no forged headers on its input
	}
	for _, h := range forged {
		want := h.Key
		if codec.Reserved(h.Key) {
			want = codec.UntrustedPrefix + h.Key
		}
		if v, ok := codec.LastHeader(r.Headers, want); !ok || string(v) != string(h.Value) {
			t.Errorf("record %s: forged header %q not kept as %q=%q: %v", r.Value, h.Key, want, h.Value, r.Headers)
		}
	}
	if _, ok := codec.LastHeader(r.Headers, "Flakestream-Error-Class"); ok {
		t.Errorf("record %s: a forged header kept its name: %v", r.Value, r.Headers)
	}
}

// Every pre-filled number the worker does not believe is dead-lettered with
// its own class; a believed one passes through; headers named like the
// worker's own never reach the output or the DLQ under their names.
func TestPrefilledNumbersAreJudged(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	in := trustInputs(t)
	produceAll(t, e, in)
	out, dlq, s := runUntil(t, e, len(in), TrustNumbers(Trust{Servers: []int64{1}, Workers: []int64{1}}))
	want := map[codec.Class]int{}
	for _, p := range in {
		if p.class != "" {
			want[p.class]++
		}
	}
	got := map[codec.Class]int{}
	for _, r := range dlq {
		v, _ := codec.LastHeader(r.Headers, codec.HeaderErrorClass)
		got[codec.Class(v)]++
		requireOwnHeaders(t, r, codec.HeaderErrorClass, codec.HeaderError, codec.HeaderSource)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dead letters by class %v, want %v", got, want)
	}
	if len(out) != 2 || s.Passthrough != 1 || s.Numbered != 1 || s.DLQ != int64(len(dlq)) {
		t.Fatalf("%d output records, stats %+v: want the believed one passed through and the unnumbered one numbered", len(out), s)
	}
	if string(out[0].Value) != in[0].value {
		t.Errorf("passed through %s, want it unchanged: %s", out[0].Value, in[0].value)
	}
	requireOwnHeaders(t, out[1], codec.HeaderNumber, codec.HeaderSource)
	if _, ok := codec.LastHeader(out[1].Headers, "trace"); !ok {
		t.Errorf("the numbered record lost its input headers: %v", out[1].Headers)
	}
	if v, _ := codec.LastHeader(out[1].Headers, codec.HeaderNumber); string(v) == "1" {
		t.Errorf("the forged number header won: %v", out[1].Headers)
	}
}

// With Renumber, a number not believed is replaced by a fresh one, and the
// flakestream-renumbered header names the class; a number that does not
// even parse is still dead-lettered.
func TestPrefilledNumbersRenumbered(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	in := trustInputs(t)
	produceAll(t, e, in)
	out, dlq, s := runUntil(t, e, len(in), TrustNumbers(Trust{Servers: []int64{1}, Workers: []int64{1}, Renumber: true}))
	if len(dlq) != 1 || s.Renumbered != 4 || s.Passthrough != 1 {
		t.Fatalf("%d dead letters, stats %+v: want only the unparsable number dead-lettered, 4 renumbered", len(dlq), s)
	}
	renumbered := map[string]bool{}
	for _, r := range out {
		num, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
		field, ok, err := codec.Field(r.Value, "order_no")
		if err != nil || !ok || string(field) != string(num) {
			t.Errorf("output %s: number field %q, header %q: want them equal", r.Value, field, num)
		}
		why, ok := codec.LastHeader(r.Headers, codec.HeaderRenumbered)
		if !ok {
			continue
		}
		renumbered[string(why)] = true
		n, _ := strconv.ParseInt(string(num), 10, 64)
		p, _ := idgen.DefaultLayout().Decompose(n)
		if p.Server != 1 || p.Worker != 1 || time.Since(p.Time) > time.Minute {
			t.Errorf("renumbered %s: number %d is not a fresh one of this worker: %+v", r.Value, n, p)
		}
		requireOwnHeaders(t, r, codec.HeaderNumber, codec.HeaderSource, codec.HeaderRenumbered)
	}
	for _, c := range []codec.Class{codec.ClassUnknownServer, codec.ClassUnknownWorker, codec.ClassFutureNumber} {
		if !renumbered[string(c)] {
			t.Errorf("no record renumbered for %s: %v", c, renumbered)
		}
	}
}

// With an idempotency key, a pre-filled number must be the key's: the
// first record of a key sets its number, whether it brought one or was
// given one, and a later record of the key with another number is
// key_mismatch (or, with Renumber, gets the key's number).
func TestPrefilledNumberAgainstKey(t *testing.T) {
	for _, renumber := range []bool{false, true} {
		t.Run(fmt.Sprint("renumber=", renumber), func(t *testing.T) {
			e := pipetest.NewEnv(t, 1)
			at := time.Now().Add(-time.Minute)
			m, m2 := compose(t, at, 1, 1, 1), compose(t, at, 1, 1, 2)
			in := []prefilled{
				{value: `{"order_ref":"K1"}`},
				{value: fmt.Sprintf(`{"order_ref":"K1","order_no":"%d"}`, m), class: codec.ClassKeyMismatch},
				{value: fmt.Sprintf(`{"order_ref":"K2","order_no":"%d"}`, m2), pass: true},
				{value: `{"order_ref":"K2"}`},
			}
			produceAll(t, e, in)
			idem := &Idempotency{Store: e.KeyStore(t), Field: "order_ref"}
			out, dlq, s := runUntil(t, e, len(in), WithIdempotency(idem), TrustNumbers(Trust{Renumber: renumber}))
			byRef := map[string][]string{}
			for _, r := range out {
				ref, _, _ := codec.Field(r.Value, "order_ref")
				num, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
				byRef[string(ref)] = append(byRef[string(ref)], string(num))
			}
			if k2 := byRef["K2"]; len(k2) != 2 || k2[0] != fmt.Sprint(m2) || k2[1] != fmt.Sprint(m2) {
				t.Errorf("K2 got numbers %v, want its pre-filled %d twice", k2, m2)
			}
			if !renumber {
				if len(dlq) != 1 || len(byRef["K1"]) != 1 {
					t.Fatalf("K1: output %v, %d dead letters: want the mismatch dead-lettered", byRef["K1"], len(dlq))
				}
				if v, _ := codec.LastHeader(dlq[0].Headers, codec.HeaderErrorClass); codec.Class(v) != codec.ClassKeyMismatch {
					t.Errorf("dead letter class %q, want key_mismatch", v)
				}
				return
			}
			k1 := byRef["K1"]
			if len(dlq) != 0 || len(k1) != 2 || k1[0] != k1[1] || k1[1] == fmt.Sprint(m) || s.Renumbered != 1 {
				t.Fatalf("K1 got %v, %d dead letters, stats %+v: want the key's number twice", k1, len(dlq), s)
			}
		})
	}
}

// With the number index, a pre-filled number that another order's key
// holds is dead-lettered as number_taken, under Renumber too; the number
// with its own key, and a number no key holds, pass.
func TestPrefilledNumberOfAnotherOrder(t *testing.T) {
	for _, renumber := range []bool{false, true} {
		t.Run(fmt.Sprint("renumber=", renumber), func(t *testing.T) {
			e := pipetest.NewEnv(t, 1)
			at := time.Now().Add(-time.Minute)
			m, m2 := compose(t, at, 1, 1, 1), compose(t, at, 1, 1, 2)
			store := e.KeyStore(t)
			store.IndexNumbers()
			// K1 was given m earlier (by this worker or another).
			if err := store.Claims(t.Context(), []idgen.Claim{{Key: []byte("K1"), Source: "earlier/0/0", Number: m}}); err != nil {
				t.Fatal(err)
			}
			in := []prefilled{
				{value: fmt.Sprintf(`{"order_ref":"K3","order_no":"%d"}`, m), class: codec.ClassNumberTaken},
				{value: fmt.Sprintf(`{"order_ref":"K1","order_no":"%d"}`, m), pass: true},
				{value: fmt.Sprintf(`{"order_ref":"K4","order_no":"%d"}`, m2), pass: true},
			}
			produceAll(t, e, in)
			idem := &Idempotency{Store: store, Field: "order_ref"}
			out, dlq, _ := runUntil(t, e, len(in), WithIdempotency(idem), TrustNumbers(Trust{Renumber: renumber}))
			if len(dlq) != 1 || len(out) != 2 {
				t.Fatalf("%d output records, %d dead letters; want 2 and 1", len(out), len(dlq))
			}
			if v, _ := codec.LastHeader(dlq[0].Headers, codec.HeaderErrorClass); codec.Class(v) != codec.ClassNumberTaken {
				t.Errorf("dead letter class %q, want number_taken", v)
			}
			if ref, _, _ := codec.Field(dlq[0].Value, "order_ref"); string(ref) != "K3" {
				t.Errorf("dead letter %s, want K3's", dlq[0].Value)
			}
			for _, r := range out {
				ref, _, _ := codec.Field(r.Value, "order_ref")
				num, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
				if want := map[string]int64{"K1": m, "K4": m2}[string(ref)]; string(num) != fmt.Sprint(want) {
					t.Errorf("%s numbered %s, want its pre-filled %d", ref, num, want)
				}
			}
		})
	}
}
