// Package pipeline wires Kafka to the number generator and the codec: the
// enrichment worker (consume, number, produce, exactly once), the audit
// consumer, and bounded replays. idgen and codec know nothing of Kafka;
// this package is where they meet it.
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

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/txnguard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// Stats are a worker's counts of committed work.
type Stats struct {
	In, Numbered, Passthrough, DLQ, Repeats, Dropped int64
	Committed, Aborted                               int64
}

// Worker numbers order events from the input topics into the output topic,
// exactly once: it is a franz-go GroupTransactSession that reads
// read_committed, produces transactionally, and commits its offsets in the
// same transaction. A crash or rebalance aborts the open transaction; its
// records are numbered again, and the numbers of the aborted attempt are
// gaps.
type Worker struct {
	cfg cfg
	m   *workerMetrics
	log *slog.Logger

	mu    sync.Mutex
	stats Stats

	joined     atomic.Bool
	lastErr    atomic.Pointer[error]
	prefetcher atomic.Pointer[Prefetcher]

	// guard aborts orphaned transactions (nil: --orphan-guard=false);
	// guardDue, used by the session goroutine only, is set when the next
	// transaction must run it first: at the start of a session and after
	// a transaction that did not commit.
	guard    *txnguard.Guard
	guardDue bool
}

// NewWorker validates the options and returns a worker. It does not
// connect; Run does.
func NewWorker(opts ...Opt) (*Worker, error) {
	c := defaultCfg()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: c, m: newWorkerMetrics(c.registerer), log: c.logger}
	if c.orphanGuard {
		g, err := txnguard.New(c.logger, c.registerer)
		if err != nil {
			return nil, err
		}
		w.guard = g
	}
	return w, nil
}

// Stats returns the worker's counts of committed work.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Ready reports nil once the worker has joined its group and its last batch
// did not fail, or why not.
func (w *Worker) Ready() error {
	if !w.joined.Load() {
		return errors.New("not in the consumer group yet")
	}
	if p := w.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// TransactionalID returns the worker's transactional ID.
func (w *Worker) TransactionalID() string { return w.cfg.txnID }

func (w *Worker) kafkaOpts() []kgo.Opt {
	c := &w.cfg
	reset := kgo.NewOffset().AtStart()
	if c.start == StartLatest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.inputs...),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.TransactionalID(c.txnID),
		kgo.TransactionTimeout(c.txnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxBytes(c.fetchMaxBytes),
		kgo.MaxBufferedRecords(c.maxBuffered),
		kgo.ProducerLinger(c.linger),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			w.joined.Store(true)
			// Numbers reserved before this assignment may be lower than
			// those the partitions' previous owner issued last; using them
			// would make a partition's numbers go down.
			if p := w.prefetcher.Load(); p != nil {
				p.Forget()
			}
		}),
		// On Kafka 4 the first produce after a commit can meet
		// CONCURRENT_TRANSACTIONS; franz-go retries it after a metadata
		// refresh, which it would otherwise do at most every 5 s.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.WithLogger(kgoLogger{w.log}),
		kgo.SessionTimeout(c.sessionTimeout),
	}
	if c.static {
		opts = append(opts, kgo.InstanceID(c.instanceID))
	}
	if c.keepControl {
		opts = append(opts, kgo.KeepControlRecords())
	}
	if c.registerer != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics("flakestream", kprom.Registerer(c.registerer))))
	}
	return append(opts, c.kafkaOpts...)
}

// Run consumes until ctx ends or a fatal error. A batch that fails for a
// passing reason (Redis down, a produce error, a rebalance) is aborted and
// retried with backoff; a fatal error (fenced, not authorized, a topic
// missing) ends Run with an error that wraps ErrFatal or ErrMissingTopic.
// After ctx ends, Run finishes or aborts the open transaction and leaves
// the group within the shutdown timeout.
func (w *Worker) Run(ctx context.Context) error {
	b := &batch{cfg: &w.cfg, numberer: w.cfg.numberer}
	if w.cfg.numbering && w.cfg.prefetch > 0 && !w.cfg.perRecord {
		chunk := 4096
		if l, ok := w.cfg.numberer.(interface{ Layout() idgen.Layout }); ok {
			chunk = int(min(l.Layout().PerMillisecond(), 1<<16))
		}
		p := NewPrefetcher(w.cfg.numberer, w.cfg.prefetch, chunk, w.cfg.prefetchAge)
		defer p.Close()
		b.numberer = p
		w.prefetcher.Store(p)
	}
	r := newRetry(w.cfg.backoffMin, w.cfg.backoffMax, w.log, &w.lastErr, "batch aborted; its records will be numbered again")
	return r.sessions(ctx, func() error {
		w.joined.Store(false)
		return w.session(ctx, b, r)
	})
}

// session runs one Kafka client until ctx ends, a fatal error, or an error
// that needs a new client (errRestartSession).
func (w *Worker) session(ctx context.Context, b *batch, r *retry) error {
	sess, err := kgo.NewGroupTransactSession(w.kafkaOpts()...)
	if err != nil {
		return fmt.Errorf("%w: kafka client: %v", ErrFatal, err)
	}
	defer w.close(sess)
	adm := kadm.NewClient(sess.Client())
	if b.outParts, b.dlqParts, err = w.checkTopics(ctx, adm); err != nil {
		return err
	}
	lagCtx, stopLag := context.WithCancel(ctx)
	defer stopLag()
	go trackLag(lagCtx, adm, w.cfg.group, w.m.lag, 10*time.Second, w.log)
	// Before the first poll: an orphan on __consumer_offsets holds the
	// group's offsets as unstable, and the consumer cannot start until it
	// is gone; an orphan on an output partition must go before we produce.
	if err := w.checkOrphans(ctx, sess.Client(), b); err != nil {
		return fmt.Errorf("%w: %v", errRestartSession, err)
	}
	w.guardDue = false

	w.log.Info("worker started", "inputs", w.cfg.inputs, "output", w.cfg.output, "dlq", w.cfg.dlq,
		"group", w.cfg.group, "transactional_id", w.cfg.txnID, "numbering", w.cfg.numbering)
	for {
		fetches := sess.PollRecords(ctx, w.cfg.maxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			// Nothing of this poll was produced: its records stay
			// uncommitted and are read again by whoever owns them next.
			return nil
		}
		if err := w.fetchErrors(fetches); err != nil {
			return err
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		err := w.transact(ctx, sess, b, fetches)
		if errors.Is(err, errRestartSession) {
			return err
		}
		if err == nil && w.cfg.afterCommit != nil && w.cfg.afterCommit(sess.Client().CommittedOffsets()) {
			w.log.Info("bounded run complete")
			return nil
		}
		if stop, err := r.after(ctx, err); stop {
			return err
		}
	}
}

// transact runs one batch as one transaction: begin, number, produce
// asynchronously, and end with one commit of records and offsets.
func (w *Worker) transact(ctx context.Context, sess *kgo.GroupTransactSession, b *batch, fetches kgo.Fetches) error {
	start := time.Now()
	if err := sess.Begin(); err != nil {
		return txnError("begin transaction", w.cfg.txnID, err)
	}
	// The transaction ends with its own bound even when ctx is cancelled
	// mid-batch: cancelling End would leave the client in an unknown
	// state, while ending it lets a shutdown commit or abort cleanly.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.shutdownTimeout)
	defer cancel()

	// Until this transaction commits, the next one runs the guard again.
	due := w.guardDue
	w.guardDue = true
	if due && w.guard != nil {
		// Before anything is produced: data of our new epoch would
		// join an orphan left open on a partition, and our commit
		// would expose it. On error nothing was produced; the abort
		// rewinds the fetched records for the retry.
		if err := w.checkOrphans(ctx, sess.Client(), b); err != nil {
			w.abort(endCtx, sess)
			return fmt.Errorf("%w: %v", ErrCommitAborted, err)
		}
	}

	b.reset(fetches)
	promise := kgo.AbortingFirstErrPromise(sess.Client())
	produce := func(r *kgo.Record) { sess.Produce(ctx, r, promise.Promise()) }
	if w.cfg.perRecord {
		// The origin's way, for the bench: wait for each record.
		produce = func(r *kgo.Record) { promise.Promise()(r, sess.ProduceSync(ctx, r).FirstErr()) }
	}
	if err := b.process(ctx, produce); err != nil {
		w.abort(endCtx, sess)
		return fmt.Errorf("%w: %v", ErrRedisDown, err)
	}
	committed, err := sess.End(endCtx, promise.Err() == nil)
	if err != nil {
		return txnError("end transaction", w.cfg.txnID, err)
	}
	if !committed {
		w.m.txns.WithLabelValues("aborted").Inc()
		w.mu.Lock()
		w.stats.Aborted++
		w.mu.Unlock()
		if perr := promise.Err(); perr != nil {
			return fmt.Errorf("%w: produce: %v", ErrCommitAborted, perr)
		}
		// A rebalance: the session aborted and rewound to the committed
		// offsets; whoever owns the partitions now numbers the records.
		w.log.Info("transaction aborted by a rebalance", "records", b.counts.in)
		return nil
	}
	w.guardDue = false
	w.m.committed(b.counts, time.Since(start))
	w.mu.Lock()
	s := &w.stats
	s.In += int64(b.counts.in)
	s.Numbered += int64(b.counts.numbered)
	s.Passthrough += int64(b.counts.passthrough)
	s.DLQ += int64(b.counts.dlq)
	s.Repeats += int64(b.counts.repeats)
	s.Dropped += int64(b.counts.dropped)
	s.Committed++
	w.mu.Unlock()
	return nil
}

// abort ends the open transaction without committing; End with TryAbort
// also rewinds the consumer to the committed offsets.
func (w *Worker) abort(ctx context.Context, sess *kgo.GroupTransactSession) {
	if _, err := sess.End(ctx, kgo.TryAbort); err != nil {
		w.log.Error("abort transaction", "err", err)
	}
	w.m.txns.WithLabelValues("aborted").Inc()
	w.mu.Lock()
	w.stats.Aborted++
	w.mu.Unlock()
}

// fetchErrors logs fetch errors and returns the fatal ones.
func (w *Worker) fetchErrors(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if isFatalKafka(fe.Err) {
			return fmt.Errorf("%w: fetch %s[%d]: %v", ErrFatal, fe.Topic, fe.Partition, fe.Err)
		}
		w.log.Warn("fetch error; retrying", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	return nil
}

func isFatalKafka(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch)
}

// close leaves the group and closes the client within the shutdown bound:
// the transaction is already ended (every batch ends its own), so leaving
// now hands the partitions over at once instead of after a session timeout.
func (w *Worker) close(sess *kgo.GroupTransactSession) {
	done := make(chan struct{})
	go func() {
		// A session given up on after a failed EndTxn may still hold
		// records it keeps retrying; they must never reach a broker after
		// the next session has fenced this one's transaction, so they are
		// failed (and in-flight requests awaited) before the client goes.
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.shutdownTimeout)
		_ = sess.Client().AbortBufferedRecords(ctx)
		cancel()
		sess.Close()
		close(done)
	}()
	select {
	case <-done:
		w.log.Info("worker stopped: left the group and closed the client")
	case <-time.After(w.cfg.shutdownTimeout):
		w.log.Error("worker stop: leaving the group took longer than the shutdown timeout; exiting anyway", "timeout", w.cfg.shutdownTimeout)
	}
}

// checkTopics finds the partition counts of the output and DLQ topics
// (creating them if allowed) and says which order guarantee holds.
func (w *Worker) checkTopics(ctx context.Context, adm *kadm.Client) (outParts, dlqParts int32, err error) {
	c := &w.cfg
	topics := append(append([]string{}, c.inputs...), c.output, c.dlq)
	var details kadm.TopicDetails
	for attempt := 0; ; attempt++ {
		details, err = adm.ListTopics(ctx, topics...)
		if err == nil || ctx.Err() != nil || attempt == 20 || isFatalKafka(err) {
			break
		}
		w.log.Warn("cannot list topics yet; retrying", "err", err)
		if sleep(ctx, w.cfg.backoffMin<<min(attempt, 5)) != nil {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: list topics: %v (check --brokers, the TLS and SASL settings, and that the brokers are up)", ErrFatal, err)
	}
	maxIn := int32(0)
	for _, t := range c.inputs {
		d, ok := details[t]
		if !ok || d.Err != nil {
			w.log.Warn("input topic does not exist yet; the worker will consume it once it does", "topic", t)
			continue
		}
		maxIn = max(maxIn, int32(len(d.Partitions)))
	}
	parts := func(topic string) (int32, error) {
		if d, ok := details[topic]; ok && d.Err == nil {
			return int32(len(d.Partitions)), nil
		}
		if !c.createTopics {
			return 0, fmt.Errorf("%w: %s (create it, or pass --create-topics)", ErrMissingTopic, topic)
		}
		n := max(maxIn, 1)
		if _, err := adm.CreateTopic(ctx, n, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("%w: create topic %s: %v", ErrFatal, topic, err)
		}
		w.log.Info("created topic", "topic", topic, "partitions", n)
		return n, nil
	}
	if outParts, err = parts(c.output); err != nil {
		return 0, 0, err
	}
	if dlqParts, err = parts(c.dlq); err != nil {
		return 0, 0, err
	}
	if outParts < maxIn || len(c.inputs) > 1 {
		w.log.Warn("several input partitions share an output partition (input partition p goes to output partition p mod "+strconv.Itoa(int(outParts))+"): each input partition's records stay in order, and the numbers within each input partition increase, but an output partition interleaves several input partitions",
			"input_partitions", maxIn, "inputs", len(c.inputs), "output_partitions", outParts)
	} else {
		w.log.Info("order: input partition p goes to output partition p; its records keep their order and their numbers increase", "output_partitions", outParts)
	}
	return outParts, dlqParts, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// checkOrphans runs the orphaned-transaction guard on the partitions a
// transaction of this worker writes: the output and DLQ partitions, and
// __consumer_offsets (all its partitions: the group's is among them), where
// an orphan holds the group's offsets unstable so that no consumer of the
// group can start.
func (w *Worker) checkOrphans(ctx context.Context, cl *kgo.Client, b *batch) error {
	if w.guard == nil {
		return nil
	}
	parts := map[string][]int32{w.cfg.output: seq(b.outParts), w.cfg.dlq: seq(b.dlqParts), "__consumer_offsets": nil}
	// Bounded: the broker may be down; the caller retries.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := w.guard.Check(ctx, cl, parts); err != nil {
		return fmt.Errorf("orphaned-transaction guard: %w", err)
	}
	return nil
}

// seq returns the partitions 0..n-1.
func seq(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// kgoLogger sends franz-go's logs to slog, one level down: the client is
// chatty at info about routine group and transaction work.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	}
	k.l.Log(context.Background(), lv, "kafka: "+msg, kv...)
}
