package pipeline

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What became of one input record in a size test.
const (
	toOutput    = "output"
	toDLQ       = "dlq"       // the whole record, in the DLQ
	toReference = "reference" // a reference record in the DLQ
)

// sizedInput is an input record built so that what the worker makes of
// it (its output, or its dead letter) is exactly batch bytes long.
type sizedInput struct {
	kind  string // "pass" (carries a number: passed through), "bad" (not JSON), "clean" (numbered)
	batch int    // batch bytes of the worker's record; clean: the value's length
	want  string // toOutput, toDLQ or toReference
	class codec.Class
}

const passNumber = 1 << 40

// sizeEnv is a one-partition env whose input takes records of up to 16 MiB
// and whose codec reads values of up to 16 MiB.
func sizeEnv(t *testing.T) (*pipetest.Env, *kadm.Client) {
	t.Helper()
	e := pipetest.NewEnv(t, 1)
	adm := e.Kafka.Admin(t)
	setTopicConfig(t, adm, e.Input, "max.message.bytes", strconv.Itoa(16<<20))
	c, err := codec.New(codec.Config{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e.Codec = c
	return e, adm
}

// produceSized writes the inputs to partition 0 of the input topic, one at
// a time, so that each one's offset, which its source header spells, is
// known while it is sized.
func produceSized(t *testing.T, e *pipetest.Env, ins []sizedInput) {
	t.Helper()
	cl := e.Kafka.Client(t, kgo.ProducerBatchMaxBytes(32<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, in := range ins {
		off := int64(len(e.Inputs))
		src := codec.AppendSource(nil, e.Input, 0, off)
		hdrs := []kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}}
		var r *kgo.Record
		switch in.kind {
		case "pass":
			num := strconv.Itoa(passNumber + int(off)) // one number per order
			r = sized(t, in.batch, in.batch-200, func(n int) *kgo.Record {
				v := `{"order_no":"` + num + `","pad":"` + strings.Repeat("x", n) + `"}`
				return &kgo.Record{Key: []byte("k"), Value: []byte(v), Headers: append(hdrs[:1:1],
					kgo.RecordHeader{Key: codec.HeaderNumber, Value: []byte(num)},
					kgo.RecordHeader{Key: codec.HeaderSource, Value: src})}
			})
		case "bad":
			r = sized(t, in.batch, in.batch-300, func(n int) *kgo.Record {
				v := []byte(`{"pad":"` + strings.Repeat("x", n))
				insp := e.Codec.Inspect(v)
				return &kgo.Record{Key: []byte("k"), Value: v, Headers: append(hdrs[:1:1],
					kgo.RecordHeader{Key: codec.HeaderErrorClass, Value: []byte(insp.Class())},
					kgo.RecordHeader{Key: codec.HeaderError, Value: []byte(insp.Err().Error())},
					kgo.RecordHeader{Key: codec.HeaderSource, Value: src})}
			})
		case "clean":
			r = &kgo.Record{Key: []byte("k"), Value: []byte(`{"order_ref":"ORD-1","pad":"` + strings.Repeat("x", in.batch) + `"}`)}
		default:
			t.Fatalf("kind %q", in.kind)
		}
		// The input is what was sized, less the worker's headers.
		r.Headers = hdrs
		r.Topic, r.Partition, r.Timestamp = e.Input, 0, time.Now().Truncate(time.Millisecond)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce an input of %d bytes: %v", len(r.Value), err)
		}
		if r.Offset != off {
			t.Fatalf("input written at offset %d, want %d", r.Offset, off)
		}
		e.Inputs = append(e.Inputs, r)
	}
}

// checkSized runs a worker with opts over the inputs and checks that every
// one went where want says, exactly once, and that no transaction aborted:
// every size was decided before producing.
func checkSized(t *testing.T, e *pipetest.Env, ins []sizedInput, opts ...Opt) {
	t.Helper()
	// Clean records around each sized one: they commit in the same
	// batches.
	var all []sizedInput
	for _, in := range ins {
		all = append(all, sizedInput{kind: "clean", batch: 100, want: toOutput}, in)
	}
	all = append(all, sizedInput{kind: "clean", batch: 100, want: toOutput})
	produceSized(t, e, all)
	wk := start(t, e, "a", opts...)
	rep := e.WaitOutput(t, 2*time.Minute)
	pipetest.RequireExactlyOnce(t, rep)
	out, err := e.ReadTopic(e.Out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := e.ReadTopic(e.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*kgo.Record{}
	for _, r := range append(out, dlq...) {
		src, _ := accounting.Header(r, codec.HeaderSource)
		got[src] = r
	}
	for i, in := range all {
		src := string(codec.AppendSource(nil, e.Input, 0, int64(i)))
		r := got[src]
		if r == nil {
			t.Fatalf("%s (%s, %d bytes): nowhere", src, in.kind, in.batch)
		}
		where := toOutput
		if r.Topic == e.DLQ {
			where = toDLQ
			if _, ok := accounting.Header(r, codec.HeaderReference); ok {
				where = toReference
			}
		}
		class, _ := accounting.Header(r, codec.HeaderErrorClass)
		if where != in.want || (in.want != toOutput && codec.Class(class) != in.class) {
			t.Errorf("%s (%s, %d bytes): went to %s as %q, want %s as %q", src, in.kind, in.batch, where, class, in.want, in.class)
		}
		if where == toOutput && batchBytes(r) > int(wk.w.limits.of(e.Out)) {
			t.Errorf("%s: output of %d batch bytes, over the limit %d", src, batchBytes(r), wk.w.limits.of(e.Out))
		}
	}
	if s := wk.w.Stats(); s.Aborted != 0 {
		t.Fatalf("%d transactions aborted: a size was not decided before producing (%+v)", s.Aborted, s)
	}
}

// around returns a pass-through and a bad record just under, at and just
// over limit: the first two fit, the third does not.
func around(limit int, overPass, overBad string) []sizedInput {
	return []sizedInput{
		{kind: "pass", batch: limit - 1, want: toOutput},
		{kind: "pass", batch: limit, want: toOutput},
		{kind: "pass", batch: limit + 1, want: overPass, class: codec.ClassOutputTooLarge},
		{kind: "bad", batch: limit - 1, want: toDLQ, class: codec.ClassNotJSON},
		{kind: "bad", batch: limit, want: toDLQ, class: codec.ClassNotJSON},
		{kind: "bad", batch: limit + 1, want: overBad, class: codec.ClassNotJSON},
	}
}

// A record just under, at and just over the producer's limit
// (MaxProduceBytes, for both topics): over it, an output goes to the DLQ
// as output_too_large, and a dead letter (this one too) as a reference.
func TestWorkerProducerLimit(t *testing.T) {
	e, _ := sizeEnv(t)
	const limit = 100_000
	checkSized(t, e, around(limit, toReference, toReference), MaxProduceBytes(limit))
}

// The output topic's max.message.bytes, and a DLQ whose limit is smaller
// than the input's: an output over its topic's limit goes to the DLQ, and
// one over the DLQ's limit as a reference.
func TestWorkerTopicLimits(t *testing.T) {
	e, adm := sizeEnv(t)
	const outLimit, dlqLimit = 150_000, 60_000
	setTopicConfig(t, adm, e.Out, "max.message.bytes", strconv.Itoa(outLimit))
	setTopicConfig(t, adm, e.DLQ, "max.message.bytes", strconv.Itoa(dlqLimit))
	ins := around(outLimit, toReference, toReference)[:3]
	ins = append(ins, around(dlqLimit, "", toReference)[3:]...)
	ins = append(ins, sizedInput{kind: "pass", batch: dlqLimit + 1, want: toOutput}) // fits the output
	checkSized(t, e, ins)
}

// Topics without a max.message.bytes of their own take the brokers'
// message.max.bytes: records just under, at and over it.
func TestWorkerBrokerLimit(t *testing.T) {
	e, adm := sizeEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim, err := topicLimits(ctx, adm, e.Out)
	if err != nil {
		t.Fatal(err)
	}
	checkSized(t, e, around(int(lim[e.Out]), toReference, toReference))
}

// A 5 MB order on topics that allow it is numbered; a 5 MB dead letter to
// a DLQ that does not becomes a reference.
func TestWorkerFiveMegabyteOrder(t *testing.T) {
	e, adm := sizeEnv(t)
	setTopicConfig(t, adm, e.Out, "max.message.bytes", strconv.Itoa(8<<20))
	checkSized(t, e, []sizedInput{
		{kind: "clean", batch: 5 << 20, want: toOutput},
		{kind: "bad", batch: 5 << 20, want: toReference, class: codec.ClassNotJSON},
	})
}

// refuseMarker is in the value of the record a broker refuses in
// TestWorkerRejectedRecord.
const refuseMarker = "REFUSE-ME"

// A record the broker refuses by itself, which no limit foretells: on a
// real broker an output topic with cleanup.policy=compact refuses a record
// without a key (INVALID_RECORD); kfake is made to refuse every produce
// request holding the marked record (POLICY_VIOLATION). The transaction
// aborts; its retry sends the record, alone, to the DLQ as rejected, and
// every other record commits, exactly once.
func TestWorkerRejectedRecord(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	e.Produce(t, 2000, orders.Mix{BadPerMille: 20})
	refused := &kgo.Record{Topic: e.Input, Partition: 1, Value: []byte(`{"order_ref":"` + refuseMarker + `"}`), Timestamp: time.Now().Truncate(time.Millisecond)}
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, refused).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Inputs = append(e.Inputs, refused)
	e.Produce(t, 2000, orders.Mix{BadPerMille: 20})

	// Installed once the inputs are written: it refuses any producer.
	if f := e.Kafka.Fake(); f != nil {
		f.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
			f.KeepControl()
			pr := req.(*kmsg.ProduceRequest)
			refuse := false
			for _, tp := range pr.Topics {
				for _, p := range tp.Partitions {
					refuse = refuse || bytes.Contains(p.Records, []byte(refuseMarker))
				}
			}
			if !refuse {
				return nil, nil, false
			}
			resp := pr.ResponseKind().(*kmsg.ProduceResponse)
			for _, tp := range pr.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
				for _, p := range tp.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, kerr.PolicyViolation.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil, true
		})
	} else {
		setTopicConfig(t, e.Kafka.Admin(t), e.Out, "cleanup.policy", "compact")
	}
	// Uncompressed, so that kfake's control sees the marker.
	wk := start(t, e, "a", setLoop(func(s *eos.Config) {
		s.MaxPollRecords = 1000
		s.KafkaOpts = []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}
	}))
	rep := e.WaitOutput(t, 2*time.Minute)
	pipetest.RequireExactlyOnce(t, rep)
	dlq, err := e.ReadTopic(e.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	src := string(codec.AppendSource(nil, refused.Topic, refused.Partition, refused.Offset))
	var rejected int
	for _, r := range dlq {
		class, _ := accounting.Header(r, codec.HeaderErrorClass)
		if codec.Class(class) != codec.ClassRejected {
			continue
		}
		rejected++
		if s, _ := accounting.Header(r, codec.HeaderSource); s != src {
			t.Errorf("%s rejected, but only %s was refused", s, src)
		}
	}
	if rejected != 1 {
		t.Fatalf("%d records dead-lettered as rejected, want the refused one", rejected)
	}
	if s := wk.w.Stats(); s.Aborted == 0 {
		t.Fatalf("no transaction aborted: the broker refused nothing (%+v)", s)
	}
}
