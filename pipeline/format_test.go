package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The registry of these tests is franz-go's in-memory srfake (no real
// Schema Registry installs here), behind a switch that makes it answer
// every request (or every POST) with an HTTP status: an outage, or a
// refusal of the output schema.
type failingRegistry struct {
	*srfake.Registry
	srv      *httptest.Server
	fail     atomic.Int64 // status for every request, 0 for none
	failPost atomic.Int64 // status for POSTs, with failBody
	failBody string
}

func newFailingRegistry(t *testing.T) *failingRegistry {
	t.Helper()
	r := &failingRegistry{Registry: srfake.New()}
	t.Cleanup(r.Registry.Close)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if code := r.fail.Load(); code != 0 {
			http.Error(w, `{"error_code":50001,"message":"down for the test"}`, int(code))
			return
		}
		if code := r.failPost.Load(); code != 0 && req.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(int(code))
			fmt.Fprint(w, r.failBody)
			return
		}
		r.Registry.Handler().ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *failingRegistry) client(t *testing.T) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(r.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func (r *failingRegistry) format(t *testing.T, e *pipetest.Env, vf codec.ValueFormat) *schema.Format {
	t.Helper()
	f, err := schema.New(schema.Settings{Format: vf, URL: r.srv.URL, OutputTopic: e.Out, MaxBytes: 64 << 10,
		Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	// Two writer versions of the same order, as during a producer rollout:
	// v2 adds a field with a default (BACKWARD compatible).
	fmtOrderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"ref","type":"string"},{"name":"qty","type":"int"}]}`
	fmtOrderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"ref","type":"string"},{"name":"qty","type":"int"},
		{"name":"channel","type":"string","default":"web"}]}`
	// Message 0 has the number field; message 1 (index [1]) does not.
	fmtOrderProto = `syntax = "proto3";
package shop;
message Order {
  string ref = 1;
  int32 qty = 2;
  string order_no = 3;
}
message Ping {
  string ref = 1;
}
`
)

func frame(id int, rest ...[]byte) []byte {
	v := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(v[1:], uint32(id))
	for _, r := range rest {
		v = append(v, r...)
	}
	return v
}

// formatInputs registers the writer schemas and returns n good orders (for
// Avro, v1 and v2 interleaved) followed by one bad record of every class
// the registry formats dead-letter, each with its expected class.
func formatInputs(t *testing.T, cl *sr.Client, vf codec.ValueFormat, subject string, n int) (good [][]byte, bad map[codec.Class][]byte) {
	t.Helper()
	ctx := context.Background()
	reg := func(s sr.Schema) int {
		id, err := cl.RegisterSchema(ctx, subject, s, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	bad = map[codec.Class][]byte{
		codec.ClassNotFramed:     []byte(`{"ref":"json, not framed"}`),
		codec.ClassUnknownSchema: frame(99999, []byte{2, 'x', 2}),
	}
	if vf == codec.ValueAvro {
		v1 := avro.MustParse(fmtOrderV1)
		v2 := avro.MustParse(fmtOrderV2)
		id1 := reg(sr.Schema{Schema: fmtOrderV1})
		id2 := reg(sr.Schema{Schema: fmtOrderV2})
		for i := range n {
			ref := fmt.Sprintf("R-%05d", i)
			if i%2 == 0 {
				p, err := avro.Marshal(v1, map[string]any{"ref": ref, "qty": i % 7})
				if err != nil {
					t.Fatal(err)
				}
				good = append(good, frame(id1, p))
			} else {
				p, err := avro.Marshal(v2, map[string]any{"ref": ref, "qty": i % 7, "channel": "app"})
				if err != nil {
					t.Fatal(err)
				}
				good = append(good, frame(id2, p))
			}
		}
		bad[codec.ClassUndecodable] = frame(id1, []byte{20, 'a'}) // a 10-byte string cut short
		return good, bad
	}
	id := reg(sr.Schema{Schema: fmtOrderProto, Type: sr.TypeProtobuf})
	for i := range n {
		var p []byte
		p = protowire.AppendTag(p, 1, protowire.BytesType)
		p = protowire.AppendString(p, fmt.Sprintf("R-%05d", i))
		p = protowire.AppendTag(p, 2, protowire.VarintType)
		p = protowire.AppendVarint(p, uint64(i%7))
		good = append(good, frame(id, []byte{0}, p))
	}
	bad[codec.ClassUndecodable] = frame(id, []byte{0}, []byte{0x0a, 20, 'a'})
	var ping []byte
	ping = protowire.AppendTag(ping, 1, protowire.BytesType)
	ping = protowire.AppendString(ping, "ping")
	bad[codec.ClassNoNumberField] = frame(id, []byte{2, 2}, ping) // message index [1]
	return good, bad
}

// produceValues writes values to e's input, round robin over partitions,
// and remembers them as e's inputs.
func produceValues(t *testing.T, e *pipetest.Env, values [][]byte) []*kgo.Record {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: e.Input, Partition: int32(i) % e.Partitions, Key: []byte(strconv.Itoa(i)), Value: v}
	}
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Inputs = append(e.Inputs, recs...)
	return recs
}

// waitFormatOutput waits until every input is accounted for and returns
// the accounting (against f) and the output and DLQ records.
func waitFormatOutput(t *testing.T, e *pipetest.Env, f codec.Format, timeout time.Duration) (accounting.Report, []*kgo.Record, []*kgo.Record) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err1 := e.ReadTopic(e.Out)
		dlq, err2 := e.ReadTopic(e.DLQ)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if len(out)+len(dlq) >= len(e.Inputs) || time.Now().After(deadline) {
			return accounting.CheckFormat(context.Background(), f, e.Inputs, out, dlq), out, dlq
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// decodeOutput decodes a numbered value with the schema its ID names in
// the registry (the output schema) and returns its ref and order_no.
func decodeOutput(t *testing.T, cl *sr.Client, vf codec.ValueFormat, v []byte) (ref, orderNo string) {
	t.Helper()
	ctx := context.Background()
	if len(v) < 6 || v[0] != 0 {
		t.Fatalf("output value %x is not framed", v)
	}
	s, err := cl.SchemaByID(ctx, int(binary.BigEndian.Uint32(v[1:5])))
	if err != nil {
		t.Fatal(err)
	}
	if vf == codec.ValueAvro {
		sch, err := avro.Parse(s.Schema)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := avro.Unmarshal(sch, v[5:], &m); err != nil {
			t.Fatalf("output does not decode with its registered schema: %v", err)
		}
		return m["ref"].(string), m["order_no"].(string)
	}
	comp := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"o.proto": s.Schema})}}
	files, err := comp.Compile(ctx, "o.proto")
	if err != nil {
		t.Fatal(err)
	}
	if v[5] != 0 {
		t.Fatalf("output message index %d, want [0]", v[5])
	}
	md := files[0].Messages().ByName("Order")
	msg := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(v[6:], msg); err != nil {
		t.Fatalf("output does not decode with its registered schema: %v", err)
	}
	return msg.Get(md.Fields().ByName("ref")).String(), msg.Get(md.Fields().ByName("order_no")).String()
}

// The worker numbers Avro (two writer versions interleaved) and Protobuf
// orders on Kafka, a real redis-server and a registry: every numbered
// output decodes with the output schema its ID names, holds the number of
// its header, is exactly the Format's numbering of its input; every bad
// record is dead-lettered, bytes untouched, with its class.
func TestWorkerValueFormats(t *testing.T) {
	for _, vf := range []codec.ValueFormat{codec.ValueAvro, codec.ValueProtobuf} {
		t.Run(string(vf), func(t *testing.T) {
			e := pipetest.NewEnv(t, 2)
			r := newFailingRegistry(t)
			cl := r.client(t)
			good, bad := formatInputs(t, cl, vf, e.Input+"-value", 400)
			values := append([][]byte{}, good...)
			for _, v := range bad {
				values = append(values, v)
			}
			produceValues(t, e, values)
			f := r.format(t, e, vf)
			wk := start(t, e, "fmt", Format(f))
			rep, out, dlq := waitFormatOutput(t, e, f, time.Minute)
			wk.stop(t)
			pipetest.RequireExactlyOnce(t, rep)
			if rep.Numbered != len(good) || rep.DLQ != len(bad) {
				t.Fatalf("numbered %d, dead-lettered %d: want %d and %d", rep.Numbered, rep.DLQ, len(good), len(bad))
			}
			outIDs := map[uint32]bool{}
			for _, o := range out {
				num, _ := accounting.Header(o, codec.HeaderNumber)
				ref, no := decodeOutput(t, cl, vf, o.Value)
				if no != num || !strings.HasPrefix(ref, "R-") {
					t.Fatalf("output decodes to ref %q order_no %q; number header %q", ref, no, num)
				}
				outIDs[binary.BigEndian.Uint32(o.Value[1:5])] = true
			}
			if want := map[codec.ValueFormat]int{codec.ValueAvro: 2, codec.ValueProtobuf: 1}[vf]; len(outIDs) != want {
				t.Errorf("output schema IDs %v: want %d (one per writer version)", outIDs, want)
			}
			if vs, err := cl.Subjects(context.Background()); err != nil || !contains(vs, e.Out+"-value") {
				t.Errorf("subjects %v (%v): want the output subject %s-value", vs, err, e.Out)
			}
			got := map[codec.Class]int{}
			for _, d := range dlq {
				class, _ := accounting.Header(d, codec.HeaderErrorClass)
				got[codec.Class(class)]++
				if want, ok := bad[codec.Class(class)]; !ok || string(want) != string(d.Value) {
					t.Errorf("dead letter of class %s: value %x, want the input's bytes untouched", class, d.Value)
				}
			}
			for class := range bad {
				if got[class] != 1 {
					t.Errorf("class %s dead-lettered %d times, want 1 (all: %v)", class, got[class], got)
				}
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A registry that answers 503 is an outage, not bad input: the worker
// aborts the batch and retries (Ready reports ErrNumbering, nothing is
// committed, nothing dead-lettered), and numbers everything once the
// registry is back.
func TestWorkerRegistryOutageRetries(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	r := newFailingRegistry(t)
	cl := r.client(t)
	good, _ := formatInputs(t, cl, codec.ValueAvro, e.Input+"-value", 100)
	produceValues(t, e, good)
	r.fail.Store(http.StatusServiceUnavailable)
	f := r.format(t, e, codec.ValueAvro)
	wk := start(t, e, "outage", Format(f))
	if !accounting.WaitFor(20*time.Second, func() bool { return errors.Is(wk.w.Ready(), ErrNumbering) }) {
		t.Fatalf("Ready() = %v during the registry outage, want ErrNumbering", wk.w.Ready())
	}
	if err := wk.w.Ready(); !errors.Is(err, codec.ErrUnavailable) {
		t.Errorf("Ready() = %v, want it to wrap codec.ErrUnavailable", err)
	}
	if s := wk.w.Stats(); s.Numbered != 0 || s.DLQ != 0 {
		t.Fatalf("stats during the outage %+v: want nothing committed", s)
	}
	r.fail.Store(0)
	rep, _, dlq := waitFormatOutput(t, e, f, time.Minute)
	wk.stop(t)
	pipetest.RequireExactlyOnce(t, rep)
	if rep.Numbered != len(good) || len(dlq) != 0 {
		t.Fatalf("after the outage: numbered %d of %d, %d dead-lettered", rep.Numbered, len(good), len(dlq))
	}
}

// An output schema the registry refuses as incompatible ends Run with a
// fatal one-line error that names the subject and the registry's reason;
// nothing is committed.
func TestWorkerIncompatibleOutputSchemaIsFatal(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	r := newFailingRegistry(t)
	cl := r.client(t)
	good, _ := formatInputs(t, cl, codec.ValueAvro, e.Input+"-value", 10)
	produceValues(t, e, good)
	r.failBody = `{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema for subject"}`
	r.failPost.Store(http.StatusConflict)
	f := r.format(t, e, codec.ValueAvro)
	w, err := NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "incompat", TransactionTimeout: 5 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, Logger: pipetest.Logger(t)}, OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(e.Generator(t, 1)), Codec(e.Codec), Format(f))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, eos.ErrFatal) || !errors.Is(err, schema.ErrIncompatible) {
		t.Fatalf("Run = %v, want eos.ErrFatal wrapping schema.ErrIncompatible", err)
	}
	msg := err.Error()
	t.Logf("Run: %s", msg)
	if strings.Contains(msg, "\n") || !strings.Contains(msg, strconv.Quote(e.Out+"-value")) || !strings.Contains(msg, "incompatible with an earlier schema") {
		t.Fatalf("Run error %q: want one line naming subject %q and the registry's reason", msg, e.Out+"-value")
	}
	if out, _ := e.ReadTopic(e.Out); len(out) != 0 {
		t.Fatalf("%d records committed to the output, want none", len(out))
	}
}

// field:<name> idempotency keys are read from the Avro record: two orders
// with the same ref get the same number, the second flagged a repeat.
func TestWorkerAvroIdempotencyField(t *testing.T) {
	e := pipetest.NewEnv(t, 1)
	r := newFailingRegistry(t)
	cl := r.client(t)
	id, err := cl.RegisterSchema(context.Background(), e.Input+"-value", sr.Schema{Schema: fmtOrderV1}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	v1 := avro.MustParse(fmtOrderV1)
	var values [][]byte
	for _, ref := range []string{"A", "B", "A"} {
		p, err := avro.Marshal(v1, map[string]any{"ref": ref, "qty": 1})
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, frame(id, p))
	}
	produceValues(t, e, values)
	f := r.format(t, e, codec.ValueAvro)
	wk := start(t, e, "idem", Format(f), WithIdempotency(&Idempotency{Store: e.KeyStore(t), Field: "ref"}))
	_, out, _ := waitFormatOutput(t, e, f, time.Minute)
	wk.stop(t)
	if len(out) != 3 {
		t.Fatalf("%d outputs, want 3", len(out))
	}
	n := func(i int) string { s, _ := accounting.Header(out[i], codec.HeaderNumber); return s }
	rep, _ := accounting.Header(out[2], codec.HeaderRepeat)
	if n(0) != n(2) || n(0) == n(1) || rep != "true" {
		t.Fatalf("numbers %s %s %s, repeat header %q: want the two A orders to share one, flagged a repeat", n(0), n(1), n(2), rep)
	}
}
