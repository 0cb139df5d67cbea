package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// perRecordTxnTimeout is the per_record baseline's transaction timeout.
const perRecordTxnTimeout = 2 * time.Minute

// measured is what throughput runs: the worker, or a baseline.
type measured interface {
	Run(ctx context.Context) error
	Ready() error
	// In counts the committed input records.
	In() int64
}

type workerRun struct{ *pipeline.Lanes }

func (w workerRun) In() int64 { return w.Stats().In }

// baseline is a step of the eos loop the worker runs on, with the worker's
// Kafka settings, that does not run the worker's batch code:
//
//   - passthrough (numberer nil) copies every record to the output
//     unchanged: the ceiling the broker and the machine allow;
//   - per record (numberer set) numbers and produces the origin's way: one
//     sequencer round trip per number and one synchronous produce per
//     record, inside the same transactions.
//
// Both live here, not in the worker, so that the worker's per-record loop
// has no branch for them.
type baseline struct {
	loop     *eos.Loop
	output   string
	parts    int32
	numberer idgen.Numberer
	codec    *codec.Codec

	batch, in atomic.Int64
	ids       []int64
	buf       []byte
}

func newBaseline(numberer idgen.Numberer, s eos.Config, opts ...pipeline.Opt) (*baseline, error) {
	if numberer != nil {
		// The origin's way takes about a millisecond per record: a
		// batch of 10,000 can outlast the default 10s transaction
		// timeout on a loaded machine, and the loop's bound on ending a
		// transaction (the shutdown timeout, 15s) runs from its begin,
		// so End failed with "context deadline exceeded" and the batch
		// was retried for good. Its slow transactions are what is
		// measured, not these bounds.
		s.TransactionTimeout, s.ShutdownTimeout = perRecordTxnTimeout, perRecordTxnTimeout
	}
	cfg, output, err := pipeline.LoopConfig(s, opts...)
	if err != nil {
		return nil, err
	}
	cd, err := codec.New(codec.Config{})
	if err != nil {
		return nil, err
	}
	b := &baseline{output: output, numberer: numberer, codec: cd}
	if b.loop, err = eos.New(cfg, b, eos.Metrics{}); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *baseline) Run(ctx context.Context) error { return b.loop.Run(ctx) }
func (b *baseline) Ready() error                  { return b.loop.Ready() }
func (b *baseline) In() int64                     { return b.in.Load() }

// Start implements eos.Step.
func (b *baseline) Start(ctx context.Context, s *eos.Session) (map[string][]int32, error) {
	topics, err := s.CheckTopics(ctx, false, b.output)
	if err != nil {
		return nil, err
	}
	b.parts = topics.Partitions[b.output]
	return topics.Produce(), nil
}

// Process implements eos.Step.
func (b *baseline) Process(ctx context.Context, tx *eos.Tx, fetches kgo.Fetches) error {
	var n int64
	var err error
	fetches.EachRecord(func(r *kgo.Record) {
		if err != nil {
			return
		}
		n++
		out := &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: b.output, Partition: r.Partition % b.parts}
		if b.numberer == nil {
			tx.Produce(ctx, out)
			return
		}
		err = b.numberOne(ctx, tx, r, out)
	})
	b.batch.Store(n)
	return err
}

// numberOne numbers r into out with a round trip of its own and waits for
// its produce.
func (b *baseline) numberOne(ctx context.Context, tx *eos.Tx, r, out *kgo.Record) error {
	in := b.codec.Inspect(r.Value)
	if in.Kind == codec.NeedsNumber {
		var err error
		if b.ids, err = b.numberer.AppendN(ctx, b.ids[:0], 1); err != nil {
			return fmt.Errorf("%w: %w", pipeline.ErrNumbering, err)
		}
		out.Value = b.codec.AppendNumbered(nil, r.Value, in, b.ids[0])
		b.buf = strconv.AppendInt(b.buf[:0], b.ids[0], 10)
		out.Headers = append(append([]kgo.RecordHeader(nil), r.Headers...),
			kgo.RecordHeader{Key: codec.HeaderNumber, Value: append([]byte(nil), b.buf...)},
			kgo.RecordHeader{Key: codec.HeaderSource, Value: codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)})
	}
	return tx.ProduceSync(ctx, out)
}

// Committed implements eos.Step.
func (b *baseline) Committed() error { b.in.Add(b.batch.Load()); return nil }

// Aborted implements eos.Step.
func (b *baseline) Aborted() {}
