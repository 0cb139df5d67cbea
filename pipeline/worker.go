package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Stats are a worker's counts of committed work.
type Stats struct {
	In, Numbered, Passthrough, DLQ, Repeats, Dropped int64
	Committed, Aborted                               int64
	// Renumbered counts, among Numbered, records whose pre-filled number
	// was not believed and was replaced (Trust.Renumber).
	Renumbered int64
}

// Worker numbers order events from the input topics into the output topic,
// exactly once: a step of the eos loop, which reads read_committed,
// produces transactionally, and commits the offsets in the same
// transaction. A crash or rebalance aborts the open transaction; its
// records are numbered again, and the numbers of the aborted attempt are
// gaps.
type Worker struct {
	cfg  cfg
	m    *workerMetrics
	log  *slog.Logger
	loop *eos.Loop

	mu    sync.Mutex
	stats Stats

	batch      *batch
	limits     limits    // of the topics produced to, learnt in Start
	rejecter   rejecter  // records refused at produce, between attempts
	start      time.Time // of the open batch
	prefetcher atomic.Pointer[idgen.Prefetcher]
}

// NewWorker validates the loop's settings s (Brokers, Topics and Group are
// required) and the worker's options, and returns a worker. It does not
// connect; Run does.
func NewWorker(s eos.Config, opts ...Opt) (*Worker, error) {
	c := defaultCfg(s)
	if err := eos.Configure(&c, opts, c.validate); err != nil {
		return nil, err
	}
	w := &Worker{cfg: c, m: newWorkerMetrics(c.eos.Registerer), log: c.eos.Logger}
	w.limits.flag = c.maxProduceBytes
	// The producer's limit per topic is the one Start learns; the hook
	// tells the rejecter which records a broker refused.
	w.cfg.eos.ClientOpts = append(w.cfg.eos.ClientOpts, kgo.ProducerBatchMaxBytesFn(w.limits.of), kgo.WithHooks(&w.rejecter))
	var err error
	m := eos.Metrics{Lag: w.m.lag, Transactions: w.m.txns, Phases: w.m.phases}
	if c.noLag {
		m.Lag = nil
	}
	w.loop, err = eos.New(w.cfg.eos, w, m)
	return w, err
}

// Stats returns the worker's counts of committed work.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	s := w.stats
	w.mu.Unlock()
	s.Committed, s.Aborted = w.loop.Counts()
	return s
}

// Ready reports nil once the worker has joined its group and its last batch
// did not fail, or why not.
func (w *Worker) Ready() error { return w.loop.Ready() }

// TransactionalID returns the worker's transactional ID.
func (w *Worker) TransactionalID() string { return w.cfg.eos.TransactionalID }

// Run consumes until ctx ends or a fatal error. A batch that fails for a
// passing reason (Redis down, a produce error, a rebalance) is aborted and
// retried with backoff; a fatal error (not authorized, a topic missing)
// ends Run with an error that wraps eos.ErrFatal or eos.ErrMissingTopic.
// After ctx ends, Run finishes or aborts the open transaction and leaves
// the group within the shutdown timeout.
func (w *Worker) Run(ctx context.Context) error {
	w.batch = &batch{cfg: &w.cfg, numberer: w.cfg.numberer, rejecter: &w.rejecter}
	if w.cfg.prefetch > 0 {
		chunk := 4096
		if l, ok := w.cfg.numberer.(interface{ Layout() idgen.Layout }); ok {
			chunk = int(min(l.Layout().PerMillisecond(), 1<<16))
		}
		p := idgen.NewPrefetcher(w.cfg.numberer, w.cfg.prefetch, chunk, w.cfg.prefetchAge)
		defer p.Close()
		w.batch.numberer = p
		w.prefetcher.Store(p)
	}
	w.batch.numberer = assigning{w.batch.numberer, w.m.assigned}
	return w.loop.Run(ctx)
}

// Start implements eos.Step: it finds the partition counts of the output
// and DLQ topics (creating them if allowed) and their record-size limits,
// and says which order guarantee holds.
func (w *Worker) Start(ctx context.Context, s *eos.Session) (map[string][]int32, error) {
	c := &w.cfg
	topics, err := s.CheckTopics(ctx, c.createTopics, c.output, c.dlq)
	if err != nil {
		return nil, err
	}
	if err := w.limits.learn(ctx, s.Admin, w.log, c.output, c.dlq); err != nil {
		return nil, err
	}
	b := w.batch
	b.outParts, b.dlqParts = topics.Partitions[c.output], topics.Partitions[c.dlq]
	b.outMax, b.dlqMax = int(w.limits.of(c.output)), int(w.limits.of(c.dlq))
	inputs := c.eos.Topics
	if maxIn := topics.MaxIn; b.outParts < maxIn || len(inputs) > 1 {
		w.log.Warn("several input partitions share an output partition (input partition p goes to output partition p mod "+strconv.Itoa(int(b.outParts))+"): each input partition's records stay in order, and the numbers within each input partition increase, but an output partition interleaves several input partitions",
			"input_partitions", maxIn, "inputs", len(inputs), "output_partitions", b.outParts)
	} else {
		w.log.Info("order: input partition p goes to output partition p; its records keep their order and their numbers increase", "output_partitions", b.outParts)
	}
	w.log.Info("worker started", "inputs", inputs, "output", c.output, "dlq", c.dlq,
		"group", c.eos.Group, "transactional_id", c.eos.TransactionalID)
	return topics.Produce(), nil
}

// Assigned implements eos.Assigner. Numbers reserved before this
// assignment may be lower than those the partitions' previous owner issued
// last; using them would make a partition's numbers go down.
func (w *Worker) Assigned(context.Context, *kgo.Client, map[string][]int32) {
	if p := w.prefetcher.Load(); p != nil {
		p.Forget()
	}
}

// Process implements eos.Step: it numbers one batch, producing each output
// record into the open transaction as soon as it is built.
func (w *Worker) Process(ctx context.Context, tx *eos.Tx, fetches kgo.Fetches) error {
	if w.rejecter.tooLarge.Swap(false) {
		// The producer learns its limits once per client.
		return fmt.Errorf("%w: a record batch was refused as too large: learning the topics' limits again", eos.ErrNewSession)
	}
	w.start = time.Now()
	w.rejecter.begin()
	w.batch.reset(fetches)
	w.batch.alone = func(r *kgo.Record) error {
		if err := tx.Flush(ctx); err != nil {
			return err
		}
		if err := tx.ProduceSync(ctx, r); err != nil {
			if refusedByBroker(err) {
				return fmt.Errorf("%w: %w", ErrRefused, err)
			}
			return err
		}
		w.rejecter.accepted(r)
		return nil
	}
	if err := w.batch.process(ctx, func(r *kgo.Record) { tx.Produce(ctx, r) }); err != nil {
		if errors.Is(err, eos.ErrFatal) || errors.Is(err, ErrRefused) || errors.Is(err, eos.ErrNewSession) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNumbering, err)
	}
	return nil
}

// Committed implements eos.Step: it counts the committed batch.
func (w *Worker) Committed() error {
	c := w.batch.counts
	w.m.committed(c, time.Since(w.start))
	w.rejecter.committed(w.batch.sources)
	w.mu.Lock()
	s := &w.stats
	s.In += int64(c.in)
	s.Numbered += int64(c.numbered)
	s.Passthrough += int64(c.passthrough)
	s.DLQ += int64(c.dlq)
	s.Repeats += int64(c.repeats)
	s.Dropped += int64(c.dropped)
	for _, n := range c.renumbered {
		s.Renumbered += int64(n)
	}
	w.mu.Unlock()
	return nil
}

// Aborted implements eos.Step. Nothing of an aborted batch is kept: its
// numbers are gaps, and the loop counts the abort. Records a broker refused
// in it are sent another way by the next attempt.
func (w *Worker) Aborted() { w.rejecter.aborted() }

// Rerouted implements eos.Rerouter: after an attempt in which a broker
// refused records, the next attempt produces them alone or dead-letters
// them, which no backoff helps; each record takes a bounded number of
// attempts before its batch commits or the worker stops (see refusal).
func (w *Worker) Rerouted() bool { return w.rejecter.rerouted.Swap(false) }

// assigning counts the numbers the batch takes, which it gives to records
// (flakestream_numbers_assigned_total): the worker asks for exactly the
// numbers its records need, so every number taken is given to one.
type assigning struct {
	idgen.Numberer
	assigned prometheus.Counter
}

func (a assigning) AppendN(ctx context.Context, dst []int64, n int) ([]int64, error) {
	out, err := a.Numberer.AppendN(ctx, dst, n)
	a.assigned.Add(float64(len(out) - len(dst)))
	return out, err
}
