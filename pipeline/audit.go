package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// Auditor is the audit side consumer. It reads the numbered topics
// read_committed in its own group, decodes every record's number into a
// codec.AuditRecord, flags anomalies (see AnomalyKinds), and writes the
// records to the audit topic, to a stdout writer, or both. It also keeps the
// metrics and the live page's state (see Handlers).
//
// With an audit topic, output is exactly once: the auditor is a franz-go
// GroupTransactSession, like the Worker, and each batch's audit records and
// consumed offsets commit in one transaction. Without one it is a plain
// group consumer that commits after writing: at least once.
type Auditor struct {
	cfg  auditCfg
	log  *slog.Logger
	det  *detector // owned by the Run goroutine
	m    *auditMetrics
	live *liveState

	auditParts int32
	out        *bufio.Writer

	mu     sync.Mutex
	fresh  map[partKey]bool // partitions assigned since their last batch
	stats  AuditStats
	joined atomic.Bool
	err    atomic.Pointer[error]
}

// AuditStats are an auditor's counts of committed work.
type AuditStats struct {
	// Audited counts the audit records written (committed).
	Audited int64
	// Clean counts the audited records without any anomaly.
	Clean int64
	// Anomalies counts flagged records by anomaly; every kind is present.
	Anomalies map[string]int64
	// Committed and Aborted count transactions (batches without a topic).
	Committed, Aborted int64
	// CaughtUp counts records read, without auditing them, to catch up on
	// newly assigned partitions.
	CaughtUp int64
	// DupEntries is the numbers the dup window holds now; DupEvictions the
	// buckets evicted to stay within its bound; Unchecked the numbers too
	// old (or too far ahead) for the window to check.
	DupEntries   int
	DupEvictions uint64
	Unchecked    uint64
}

// NewAuditor validates the options and returns an auditor. It does not
// connect; Run does.
func NewAuditor(opts ...AuditOpt) (*Auditor, error) {
	c := defaultAuditCfg()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	a := &Auditor{cfg: c, log: c.logger, fresh: map[partKey]bool{}}
	a.det = newDetector(detectorConfig{
		layout: c.layout, field: c.field, window: c.dupWindow, maxEntries: c.dupMaxEntries,
		maxSkew: c.maxSkew, maxLag: c.maxLag, servers: c.servers, workers: c.workers,
		skipRedelivered: c.auditTopic == "", now: c.now,
	})
	a.m = newAuditMetrics(c.registerer, c.layout)
	a.live = newLiveState(&a.cfg, a.m)
	a.stats.Anomalies = map[string]int64{}
	for _, k := range anomalyKinds {
		a.stats.Anomalies[k] = 0
	}
	if c.stdout != nil {
		a.out = bufio.NewWriterSize(c.stdout, 64<<10)
	}
	return a, nil
}

// Stats returns the auditor's counts of committed work.
func (a *Auditor) Stats() AuditStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Anomalies = make(map[string]int64, len(a.stats.Anomalies))
	for k, v := range a.stats.Anomalies {
		s.Anomalies[k] = v
	}
	return s
}

// Ready reports nil once the auditor has joined its group and its last
// batch did not fail, or why not.
func (a *Auditor) Ready() error {
	if !a.joined.Load() {
		return errors.New("not in the consumer group yet")
	}
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TransactionalID returns the auditor's transactional ID ("" without an
// audit topic, when it does not produce).
func (a *Auditor) TransactionalID() string {
	if a.cfg.auditTopic == "" {
		return ""
	}
	return a.cfg.txnID
}

func (a *Auditor) kafkaOpts(txn bool) []kgo.Opt {
	c := &a.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.inputs...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(c.sessionTimeout),
		kgo.OnPartitionsAssigned(a.assigned),
		kgo.WithLogger(kgoLogger{a.log}),
		kgo.MetadataMinAge(250 * time.Millisecond), // see the worker's kafkaOpts
	}
	if txn {
		opts = append(opts, kgo.TransactionalID(c.txnID), kgo.TransactionTimeout(c.txnTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else {
		// No rebalance between a poll and the commit after it: records are
		// only read again after a crash or a failed commit.
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	}
	if c.registerer != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics("flakestream_audit", kprom.Registerer(c.registerer))))
	}
	return append(opts, c.kafkaOpts...)
}

// assigned marks partitions to catch up on before their first batch.
func (a *Auditor) assigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	a.mu.Lock()
	for t, ps := range parts {
		for _, p := range ps {
			a.fresh[partKey{t, p}] = true
		}
	}
	a.mu.Unlock()
	a.joined.Store(true)
}

// consumer is what Run needs of a GroupTransactSession or a plain client.
type consumer interface {
	PollRecords(ctx context.Context, n int) kgo.Fetches
	Close()
}

// plainConsumer closes a client that blocks rebalances on poll.
type plainConsumer struct{ *kgo.Client }

func (p plainConsumer) Close() { p.CloseAllowingRebalance() }

// Run audits until ctx ends or a fatal error. A batch that fails for a
// passing reason is aborted and retried with backoff; a fatal one (fenced,
// not authorized, the audit topic missing, stdout closed) ends Run with an
// error wrapping ErrFatal or ErrMissingTopic. After ctx ends, Run finishes
// or aborts the open transaction and leaves the group within the shutdown
// timeout.
func (a *Auditor) Run(ctx context.Context) error {
	r := newRetry(a.cfg.backoffMin, a.cfg.backoffMax, a.log, &a.err, "audit batch failed; retrying")
	return r.sessions(ctx, func() error { return a.session(ctx, r) })
}

// session runs one Kafka client until ctx ends, a fatal error, or an error
// that needs a new client (errRestartSession).
func (a *Auditor) session(ctx context.Context, r *retry) error {
	txn := a.cfg.auditTopic != ""
	var (
		cons    consumer
		client  *kgo.Client
		sess    *kgo.GroupTransactSession
		process func(context.Context, *auditBatch) error
	)
	if txn {
		s, err := kgo.NewGroupTransactSession(a.kafkaOpts(true)...)
		if err != nil {
			return fmt.Errorf("%w: kafka client: %v", ErrFatal, err)
		}
		sess, cons, client = s, s, s.Client()
		process = func(ctx context.Context, b *auditBatch) error { return a.transact(ctx, sess, b) }
	} else {
		cl, err := kgo.NewClient(a.kafkaOpts(false)...)
		if err != nil {
			return fmt.Errorf("%w: kafka client: %v", ErrFatal, err)
		}
		// A poll blocks rebalances until AllowRebalance; closing must
		// allow them too, or leaving the group waits for a poll that
		// never comes.
		cons, client = plainConsumer{cl}, cl
		process = func(ctx context.Context, b *auditBatch) error { return a.writeThenCommit(ctx, cl, b) }
	}
	defer a.close(cons)
	if sess != nil {
		// Runs before the close above: records a dropped session still
		// retries must not reach a broker after the next one fenced it.
		defer func() {
			actx, cancel := context.WithTimeout(context.Background(), a.cfg.shutdownTimeout)
			defer cancel()
			_ = sess.Client().AbortBufferedRecords(actx)
		}()
	}
	adm := kadm.NewClient(client)
	if err := a.checkTopics(ctx, adm); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the brokers: not a failure
		}
		return err
	}
	lagCtx, stopLag := context.WithCancel(ctx)
	defer stopLag()
	go trackLag(lagCtx, adm, a.cfg.group, a.m.lag, a.cfg.lagEvery, a.log)

	a.log.Info("audit started", "inputs", a.cfg.inputs, "audit_topic", a.cfg.auditTopic, "group", a.cfg.group,
		"transactional_id", a.TransactionalID(), "layout", a.cfg.layout.String(), "dup_window", a.cfg.dupWindow,
		"dup_max_entries", a.cfg.dupMaxEntries, "stdout", a.out != nil)
	if !txn {
		a.log.Info("no audit topic: audit records are written at least once (a crash between writing and committing offsets writes them again)")
	}
	b := &auditBatch{}
	for {
		fetches := cons.PollRecords(ctx, a.cfg.maxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		err := a.fetchErrors(fetches)
		if err == nil && fetches.NumRecords() > 0 {
			b.reset(fetches)
			if a.cfg.catchUp {
				a.catchUp(ctx, b.in)
			}
			err = process(ctx, b)
		}
		if !txn {
			client.AllowRebalance()
		}
		if errors.Is(err, errRestartSession) {
			return err
		}
		if stop, err := r.after(ctx, err); stop {
			return err
		}
	}
}

// transact audits one batch in one transaction: the audit records and the
// consumed offsets commit together, and only then does the detector keep
// what the batch taught it.
func (a *Auditor) transact(ctx context.Context, sess *kgo.GroupTransactSession, b *auditBatch) error {
	if err := sess.Begin(); err != nil {
		return txnError("begin transaction", a.TransactionalID(), err)
	}
	// As in the worker: End gets its own bound, so a shutdown mid-batch
	// still commits or aborts cleanly.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.shutdownTimeout)
	defer cancel()
	a.det.begin()
	b.build(a.det, a.cfg.auditTopic, a.auditParts)
	promise := kgo.AbortingFirstErrPromise(sess.Client())
	for _, r := range b.out {
		sess.Produce(ctx, r, promise.Promise())
	}
	committed, err := sess.End(endCtx, promise.Err() == nil)
	if err != nil {
		a.det.abort()
		return txnError("end transaction", a.TransactionalID(), err)
	}
	if !committed {
		a.det.abort()
		a.aborted()
		if perr := promise.Err(); perr != nil {
			return fmt.Errorf("%w: produce audit records: %v", ErrCommitAborted, perr)
		}
		a.log.Info("audit transaction aborted by a rebalance; its records will be audited again", "records", len(b.in))
		return nil
	}
	a.det.commit()
	return a.committed(b)
}

// writeThenCommit is the batch without an audit topic: write, keep, then
// commit the offsets. A failed commit is not retried here: the records
// were written, and this instance skips them if they come back.
func (a *Auditor) writeThenCommit(ctx context.Context, cl *kgo.Client, b *auditBatch) error {
	a.det.begin()
	b.build(a.det, "", 0)
	if err := a.writeLines(b); err != nil {
		a.det.abort()
		return err
	}
	a.det.commit()
	if err := a.committed(b); err != nil {
		return err
	}
	if err := cl.CommitRecords(ctx, b.in...); err != nil && ctx.Err() == nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	return nil
}

// committed accounts for a committed batch: stats, metrics, the live page,
// and (with a topic) the stdout lines.
func (a *Auditor) committed(b *auditBatch) error {
	a.mu.Lock()
	a.stats.Audited += int64(len(b.recs))
	a.stats.Committed++
	for i := range b.recs {
		if b.sets[i] == 0 {
			a.stats.Clean++
		}
		for _, k := range b.recs[i].Anomalies {
			a.stats.Anomalies[k]++
		}
	}
	a.stats.DupEntries = a.det.dups.entries
	a.stats.DupEvictions = a.det.dups.evictions
	a.stats.Unchecked = a.det.unchecked
	a.mu.Unlock()
	a.m.committed(b, a.det)
	a.live.add(b, a.cfg.now())
	if a.cfg.auditTopic != "" {
		return a.writeLines(b)
	}
	return nil
}

func (a *Auditor) aborted() {
	a.m.txns.WithLabelValues("aborted").Inc()
	a.mu.Lock()
	a.stats.Aborted++
	a.mu.Unlock()
}

// writeLines writes the batch's audit records as JSON lines, if asked to.
// A writer that fails (stdout closed) is fatal: the output asked for can
// no longer be given.
func (a *Auditor) writeLines(b *auditBatch) error {
	if a.out == nil {
		return nil
	}
	for _, v := range b.values {
		_, _ = a.out.Write(v)
		_ = a.out.WriteByte('\n')
	}
	if err := a.out.Flush(); err != nil {
		return fmt.Errorf("%w: write audit records to stdout: %v", ErrFatal, err)
	}
	return nil
}

// fetchErrors logs fetch errors and returns the fatal ones.
func (a *Auditor) fetchErrors(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if isFatalKafka(fe.Err) {
			return fmt.Errorf("%w: fetch %s[%d]: %v", ErrFatal, fe.Topic, fe.Partition, fe.Err)
		}
		a.log.Warn("fetch error; retrying", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	return nil
}

// close leaves the group and closes the client within the shutdown bound.
// Every batch has ended its transaction (or committed its offsets) by now.
func (a *Auditor) close(c consumer) {
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
		a.log.Info("audit stopped: left the group and closed the client")
	case <-time.After(a.cfg.shutdownTimeout):
		a.log.Error("audit stop: leaving the group took longer than the shutdown timeout; exiting anyway", "timeout", a.cfg.shutdownTimeout)
	}
}

// checkTopics finds the audit topic's partition count, creating the topic
// if allowed.
func (a *Auditor) checkTopics(ctx context.Context, adm *kadm.Client) error {
	c := &a.cfg
	topics := append(append([]string{}, c.inputs...), c.auditTopic)
	if c.auditTopic == "" {
		topics = topics[:len(topics)-1]
	}
	var details kadm.TopicDetails
	var err error
	for attempt := 0; ; attempt++ {
		details, err = adm.ListTopics(ctx, topics...)
		if err == nil || ctx.Err() != nil || attempt == 20 {
			break
		}
		a.log.Warn("cannot list topics yet; retrying", "err", err)
		if sleep(ctx, c.backoffMin<<min(attempt, 5)) != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: list topics: %v", ErrFatal, err)
	}
	maxIn := int32(1)
	for _, t := range c.inputs {
		if d, ok := details[t]; !ok || d.Err != nil {
			a.log.Warn("input topic does not exist yet; the auditor will read it once it does", "topic", t)
			continue
		}
		maxIn = max(maxIn, int32(len(details[t].Partitions)))
	}
	if c.auditTopic == "" {
		return nil
	}
	if d, ok := details[c.auditTopic]; ok && d.Err == nil {
		a.auditParts = int32(len(d.Partitions))
	} else if !c.createTopic {
		return fmt.Errorf("%w: %s (create it, or pass --create-topics)", ErrMissingTopic, c.auditTopic)
	} else {
		if _, err := adm.CreateTopic(ctx, maxIn, -1, nil, c.auditTopic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("%w: create topic %s: %v", ErrFatal, c.auditTopic, err)
		}
		a.log.Info("created topic", "topic", c.auditTopic, "partitions", maxIn)
		a.auditParts = maxIn
	}
	if a.auditParts < maxIn || len(c.inputs) > 1 {
		a.log.Warn("several numbered partitions share an audit partition (partition p goes to audit partition p mod "+strconv.Itoa(int(a.auditParts))+"): each one's audit records stay in order, interleaved",
			"input_partitions", maxIn, "audit_partitions", a.auditParts)
	}
	return nil
}
