package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
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
		if v, _ := accounting.Header(r, codec.HeaderRepeat); v == "true" {
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
	if !accounting.WaitFor(30*time.Second, func() bool { return strict.w.Stats().In == 10 }) {
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
	if class, _ := accounting.Header(dlq[0], codec.HeaderErrorClass); class != string(codec.ClassMissingKey) {
		t.Fatalf("class %q", class)
	}

	e.Group += "-optional"
	e.Out = e.Input + ".opt"
	e.Kafka.CreateTopic(t, e.Out, 1)
	lax := start(t, e, "lax", WithIdempotency(&Idempotency{Store: store, Field: "order_ref", Optional: true}))
	if !accounting.WaitFor(30*time.Second, func() bool { return lax.w.Stats().In == 10 }) {
		t.Fatalf("stats %+v", lax.w.Stats())
	}
	lax.stop(t)
	if s := lax.w.Stats(); s.DLQ != 0 || s.Numbered != 10 || s.Repeats != 9 {
		t.Fatalf("optional stats %+v: want all 10 numbered, 9 of them repeats of the first run", s)
	}
}

func TestParseKeySpec(t *testing.T) {
	for in, want := range map[string]KeySpec{"key": {}, "field:order_ref": {Field: "order_ref"}, "header:order-ref": {Header: "order-ref"}} {
		if got, err := ParseKeySpec(in); err != nil || got != want || got.String() != in {
			t.Errorf("ParseKeySpec(%q) = %+v (%q), %v", in, got, got.String(), err)
		}
	}
	for _, bad := range []string{"", "field:", "header:", "ref", "Key", "headers:x"} {
		if _, err := ParseKeySpec(bad); !errors.Is(err, ErrIdempotencyKey) {
			t.Errorf("ParseKeySpec(%q) = %v", bad, err)
		}
	}
	if _, err := ParseOnRepeat("skip"); !errors.Is(err, ErrIdempotencyKey) || !strings.Contains(err.Error(), "emit or drop") {
		t.Errorf("ParseOnRepeat(skip) = %v", err)
	}
}

// KeySpec.Key reads the record key, the last header of the name, or the
// field; a record without one is an error that is not a KeyFailedError.
func TestKeySpecKey(t *testing.T) {
	f := codec.JSONFormat{}
	r := &kgo.Record{Key: []byte("k1"), Value: []byte(`{"ref":"R-7","n":null}`),
		Headers: []kgo.RecordHeader{{Key: "ref", Value: []byte("old")}, {Key: "ref", Value: []byte("H-2")}, {Key: "empty"}}}
	for _, c := range []struct {
		spec KeySpec
		want string
	}{{KeySpec{}, "k1"}, {KeySpec{Field: "ref"}, "R-7"}, {KeySpec{Header: "ref"}, "H-2"}} {
		if got, err := c.spec.Key(context.Background(), f, r); err != nil || string(got) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.spec, got, err, c.want)
		}
	}
	for _, spec := range []KeySpec{{Field: "n"}, {Field: "none"}, {Header: "none"}, {Header: "empty"}} {
		var kf *KeyFailedError
		if got, err := spec.Key(context.Background(), f, r); err == nil || errors.As(err, &kf) {
			t.Errorf("%s: %q, %v; want a missing key", spec, got, err)
		}
	}
	if _, err := (KeySpec{}).Key(context.Background(), f, &kgo.Record{}); err == nil {
		t.Error("a record without a key has one")
	}
}

// A header key: records with the same order-ref header get one number, a
// record without the header goes to the DLQ as missing_key.
func TestIdempotencyHeaderKey(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	recs := orders.Records(e.Input, 1, 6, orders.Mix{}, 200, 0)
	for i, r := range recs {
		if i != 5 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "order-ref", Value: []byte{'R', byte('0' + i%2)}})
		}
	}
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Inputs = recs
	w := start(t, e, "hdr", WithIdempotency(&Idempotency{Store: e.KeyStore(t), Header: "order-ref"}))
	if !accounting.WaitFor(30*time.Second, func() bool { return w.w.Stats().In == 6 }) {
		t.Fatalf("stats %+v", w.w.Stats())
	}
	w.stop(t)
	if s := w.w.Stats(); s.DLQ != 1 || s.Numbered != 5 || s.Repeats != 3 {
		t.Fatalf("stats %+v: want 5 numbered (3 of them repeats), 1 missing_key", s)
	}
	out, _ := e.ReadTopic(e.Out)
	byRef := map[string]map[string]bool{}
	for _, r := range out {
		ref, _ := accounting.Header(r, "order-ref")
		n, _ := accounting.Header(r, codec.HeaderNumber)
		if byRef[ref] == nil {
			byRef[ref] = map[string]bool{}
		}
		byRef[ref][n] = true
	}
	if len(byRef) != 2 || len(byRef["R0"]) != 1 || len(byRef["R1"]) != 1 {
		t.Fatalf("numbers by header key: %v, want one number for R0 and one for R1", byRef)
	}
}
