package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/pipetest"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Two workers meet the same order references at the same moment (two input
// topics with the same orders): each order gets one number, and both emit it.
func TestIdempotencyConcurrentWorkers(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	e.Produce(t, 2000, orders.Mix{})
	other := e.On(t)
	other.Produce(t, 2000, orders.Mix{})
	idem := &Idempotency{Store: e.KeyStore(t), Field: "order_ref"}
	a := start(t, e, "a", WithIdempotency(idem))
	b := start(t, other, "b", WithIdempotency(idem))
	ra, rb := e.WaitOutput(t, 60*time.Second), other.WaitOutput(t, 60*time.Second)
	if ra.Lost+rb.Lost != 0 {
		t.Fatalf("lost records: %s / %s", ra, rb)
	}
	outA, _ := e.ReadTopic(e.Out)
	outB, _ := other.ReadTopic(other.Out)
	na, nb := pipetest.NumbersByRef(t, outA), pipetest.NumbersByRef(t, outB)
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

// A record without the key field goes to the DLQ as missing_key, or with
// Optional is numbered like any other. With Drop, repeats are counted and
// not written.
func TestIdempotencyMissingKeyAndDrop(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	recs := orders.Records(e.Input, 1, 10, orders.Mix{}, 200, 0)
	recs[3].Value = []byte(`{"customer":"C-1","amount":"1.00"}`)
	recs[7].Value = append([]byte(nil), recs[2].Value...) // order 2 again
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Inputs = recs
	store := e.KeyStore(t)

	strict := start(t, e, "strict", WithIdempotency(&Idempotency{Store: store, Field: "order_ref", Drop: true}))
	if !verify.WaitFor(30*time.Second, func() bool { return strict.w.Stats().In == 10 }) {
		t.Fatalf("stats %+v", strict.w.Stats())
	}
	strict.stop(t)
	s := strict.w.Stats()
	if s.DLQ != 1 || s.Dropped != 1 || s.Repeats != 1 || s.Numbered != 8 || s.In != s.Numbered+s.Passthrough+s.DLQ+s.Dropped {
		t.Fatalf("strict stats %+v: want 1 missing_key, 1 dropped repeat, 8 numbered", s)
	}
	dlq, _ := e.ReadTopic(e.DLQ)
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters", len(dlq))
	}
	if class, _ := verify.Header(dlq[0], codec.HeaderErrorClass); class != string(codec.ClassMissingKey) {
		t.Fatalf("class %q", class)
	}

	e.Group += "-optional"
	e.Out = e.Input + ".opt"
	e.Kafka.CreateTopic(t, e.Out, 1)
	lax := start(t, e, "lax", WithIdempotency(&Idempotency{Store: store, Field: "order_ref", Optional: true}))
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
