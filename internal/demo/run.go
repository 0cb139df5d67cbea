package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/kread"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FormatFunc returns the value format the demo's worker numbers with: JSON
// through cd, or Avro or Protobuf through a registry, for the output topic.
type FormatFunc func(cd *codec.Codec, l idgen.Layout, output string) (codec.Format, error)

// The topics of both demos; the audit's is the numbered one's plus
// ".audit" (see startAudit).
const (
	inputTopic  = "orders"
	outputTopic = "orders.numbered"
	dlqTopic    = "orders.dlq"
	auditTopic  = outputTopic + ".audit"
)

// Run is the one-shot demo: it numbers n orders over parts partitions on
// the embedded stack, audits the output, and accounts for every order as
// `flakestream verify` does (verify.Run on the demo's topics).
// format, if set, is the value format (nil: JSON through the stack's
// codec). Run fails only when the demo could not run; a run that was not
// exactly once is in the Summary's Report.
func Run(ctx context.Context, n int, parts int32, log *slog.Logger, format FormatFunc) (*Summary, error) {
	emb, err := StartEmbedded(parts, []string{inputTopic, outputTopic, dlqTopic}, nil, nil)
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	brokers, gen, cd := emb.Brokers, emb.Gen, emb.Codec

	var vf codec.Format = codec.JSONFormat{C: cd}
	if format != nil {
		if vf, err = format(cd, gen.Layout(), outputTopic); err != nil {
			return nil, err
		}
	}
	events, err := Events(ctx, vf, inputTopic)
	if err != nil {
		return nil, err
	}
	if err := produceOrders(ctx, brokers, parts, n, gen.Layout(), events); err != nil {
		return nil, err
	}

	took, err := runWorker(ctx, n, workerSettings(brokers, log), append(workerOptions(gen, cd), pipeline.Format(vf)))
	if err != nil {
		return nil, err
	}
	// The audit runs after the worker, so that the worker's figure above
	// is its own.
	aud, err := startAudit(ctx, brokers, gen.Layout(), log, nil)
	if err != nil {
		return nil, err
	}

	res, err := verify.Run(ctx, verify.Config{Brokers: brokers, Inputs: []string{inputTopic}, Output: outputTopic,
		DLQ: dlqTopic, Format: vf})
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	out, err := kread.ReadCommitted(ctx, opts, outputTopic)
	if err != nil {
		return nil, err
	}
	dl, err := kread.ReadCommitted(ctx, opts, dlqTopic)
	if err != nil {
		return nil, err
	}
	if err := aud.finish(ctx, brokers, len(out)); err != nil {
		return nil, err
	}
	dlq := map[string]int{}
	for _, d := range dl {
		class, _ := codec.LastHeader(d.Headers, codec.HeaderErrorClass)
		dlq[string(class)]++
	}
	var samples []*kgo.Record
	for i := 0; i < len(out) && len(samples) < 3; i += len(out)/3 + 1 {
		samples = append(samples, out[i])
	}
	return newSummary(res.Report, n, took, gen.Layout(), dlq, samples, aud.summary()), nil
}

// Events registers the demo order schema of the Format's value format
// under "<input topic>-value" and returns a maker of demo order i, framed
// with its ID, stamped now. For JSON it returns nil: the callers' own JSON
// events stand.
func Events(ctx context.Context, f codec.Format, input string) (func(i int) []byte, error) {
	sf, ok := f.(*schema.Format)
	if !ok {
		return nil, nil
	}
	id, err := schema.RegisterDemoSchema(ctx, sf.Client(), sf.Name(), input+"-value")
	if err != nil {
		return nil, err
	}
	vf := sf.Name()
	return func(i int) []byte {
		return schema.AppendDemoOrder(nil, vf, id, i, time.Now().UnixMilli())
	}, nil
}

// runWorker runs a worker with opts until it has read all n orders,
// then stops it, and returns how long the n took.
func runWorker(ctx context.Context, n int, s eos.Config, opts []pipeline.Opt) (time.Duration, error) {
	w, err := pipeline.NewWorker(s, opts...)
	if err != nil {
		return 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(wctx) }()
	for w.Stats().In < int64(n) {
		select {
		case err := <-done:
			return 0, fmt.Errorf("worker stopped early: %v", err)
		case <-ctx.Done():
			return 0, fmt.Errorf("worker numbered %d of %d orders before the timeout", w.Stats().In, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		return 0, err
	}
	return took, nil
}

// produceOrders writes the demo's n orders to the input topic. events, if set, makes the orders (Avro or Protobuf, see records)
// instead of the JSON mix.
func produceOrders(ctx context.Context, brokers []string, parts int32, n int, l idgen.Layout, events func(int) []byte) error {
	// The orders: one in a thousand malformed (every dead-letter class in
	// turn), two in a thousand already numbered.
	// The numbered ones carry numbers an earlier run (server 2) issued a
	// minute before, and come first in their partitions (see numberedFirst):
	// clean data, which the audit finds clean.
	earlier, err := l.Compose(time.Now().Add(-time.Minute).UnixMilli(), 2, 1, 0)
	if err != nil {
		return err
	}
	mix := orders.Mix{BadPerMille: 1, NumberedPerMille: 2}
	var inputs []*kgo.Record
	if events != nil {
		inputs = records(inputTopic, parts, n, events)
	} else {
		inputs = numberedFirst(orders.Records(inputTopic, parts, n, mix, 200, earlier), mix)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer prod.Close()
	for i := 0; i < len(inputs); i += 10000 {
		if err := prod.ProduceSync(ctx, inputs[i:min(i+10000, len(inputs))]...).FirstErr(); err != nil {
			return fmt.Errorf("produce orders: %w", err)
		}
	}
	return nil
}

// workerGroup is the group of the demo's worker.
const workerGroup = "flakestream-demo"

// records are the demo's n Avro or Protobuf orders over parts partitions,
// one in a thousand bad, each of the registry's dead-letter classes in
// turn: not framed (a JSON value), an unknown schema ID, a payload cut
// short (undecodable).
func records(topic string, parts int32, n int, events func(int) []byte) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := events(i)
		if i%1000 == 999 {
			switch (i / 1000) % 3 {
			case 0:
				v = []byte(`{"event":"order_created"}`)
			case 1:
				v = append([]byte{0, 0x7f, 0xff, 0xff, 0xfe}, v[5:]...)
			case 2:
				v = v[:len(v)-3]
			}
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: fmt.Appendf(nil, "order-%d", i), Value: v}
	}
	return recs
}

// workerSettings and workerOptions are the loop's settings and the
// options of the demo's worker: the one place the demos build them.
func workerSettings(brokers []string, log *slog.Logger) eos.Config {
	return eos.Config{Brokers: brokers, Topics: []string{inputTopic}, Group: workerGroup, InstanceID: "demo", Logger: log}
}

func workerOptions(gen *idgen.Generator, cd *codec.Codec) []pipeline.Opt {
	return []pipeline.Opt{pipeline.OutputTopic(outputTopic), pipeline.DLQTopic(dlqTopic), pipeline.Numbers(gen), pipeline.Codec(cd)}
}

// numberedFirst reorders the orders so that, in each partition, the ones
// an earlier run already numbered come first, as they would in a stream
// that the earlier run fed before this one started: every partition's
// numbers then increase. Interleaved with new orders, an older number
// after a newer one is, truly, a number going backwards in its partition,
// and the audit says so.
func numberedFirst(recs []*kgo.Record, mix orders.Mix) []*kgo.Record {
	out := make([]*kgo.Record, 0, len(recs))
	for i, r := range recs {
		if mix.KindOf(i) == orders.Numbered {
			out = append(out, r)
		}
	}
	for i, r := range recs {
		if mix.KindOf(i) != orders.Numbered {
			out = append(out, r)
		}
	}
	return out
}
