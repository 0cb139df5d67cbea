// Package eos is the exactly-once consume-process-produce loop, written
// once for every product that runs one (the worker, the auditor, bounded
// replays, the bench's baselines). It is shaped like franz-go's
// examples/transactions eos consumer: poll, begin, produce, end with one
// commit of the records and the consumed offsets, and on any doubt replace
// the session and start again from the committed offsets.
//
// The loop owns the Kafka side: the client options, the session restart,
// Begin and End with their own time bound, abort accounting, the close
// order, topic checks, fetch errors, readiness and lag. What a batch means
// is a Step's business. The loop knows nothing of numbers.
package eos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// ConsumerOffsetsTopic is Kafka's internal topic of committed offsets, which
// every transaction of the loop writes to.
const ConsumerOffsetsTopic = "__consumer_offsets"

// Step is what a product plugs into the loop.
type Step interface {
	// Start is called at the start of every session, before the first
	// poll: it checks (or creates) the topics it produces to, usually
	// with Session.CheckTopics, and returns their partitions, which the
	// loop hands to Config.BeforeProduce. An error ends Run.
	Start(ctx context.Context, s *Session) (produceTo map[string][]int32, err error)
	// Process handles one polled batch. In Transactional mode tx is the
	// open transaction, and every record the batch produces goes through
	// it; in AtLeastOnce mode tx is nil. fetches holds no transaction
	// markers and no record past a Bound. An error aborts the
	// transaction; wrap ErrFatal to end Run, anything else is retried.
	Process(ctx context.Context, tx *Tx, fetches kgo.Fetches) error
	// Committed is called once the batch's transaction committed (in
	// AtLeastOnce mode: before its offsets are committed). An error
	// wrapping ErrFatal ends Run.
	Committed() error
	// Aborted is called when the batch's transaction did not commit.
	Aborted()
}

// Assigner is a Step that wants to hear of newly assigned partitions.
type Assigner interface {
	Assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32)
}

// Revoker is a Step that wants to hear of revoked partitions.
type Revoker interface {
	Revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32)
}

// Loop runs a Step, exactly once (or at least once, by Config.Mode).
type Loop struct {
	cfg  Config
	step Step
	m    Metrics

	joined             atomic.Bool
	lastErr            atomic.Pointer[error]
	committed, aborted atomic.Int64
	clock              phaseClock // marks for Metrics.Phases
}

// New validates cfg and returns a loop that runs step and reports to m. It
// does not connect; Run does.
func New(cfg Config, step Step, m Metrics) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Loop{cfg: cfg, step: step, m: m}, nil
}

// Config returns the validated configuration, defaults filled in.
func (l *Loop) Config() *Config { return &l.cfg }

// Ready reports nil once the loop has joined its group and its last batch
// did not fail, or why not.
func (l *Loop) Ready() error {
	if !l.joined.Load() {
		return errors.New("not in the consumer group yet")
	}
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Counts returns the transactions (AtLeastOnce: batches) committed and
// aborted so far.
func (l *Loop) Counts() (committed, aborted int64) { return l.committed.Load(), l.aborted.Load() }

// Run consumes until ctx ends, a fatal error, or a Bound is reached. A batch
// that fails for a passing reason is aborted and retried with backoff; a
// fatal error ends Run with an error wrapping ErrFatal or ErrMissingTopic.
// After ctx ends, Run finishes or aborts the open transaction and leaves
// the group within the shutdown timeout.
func (l *Loop) Run(ctx context.Context) error {
	what := l.cfg.Name + " batch failed; retrying"
	if l.cfg.Mode == Transactional {
		what = l.cfg.Name + " batch aborted; its records will be processed again"
	}
	r := &retry{min: l.cfg.BackoffMin, max: l.cfg.BackoffMax, cur: l.cfg.BackoffMin,
		log: l.cfg.Logger, last: &l.lastErr, what: what}
	return r.sessions(ctx, func() error {
		l.joined.Store(false)
		return l.session(ctx, r)
	})
}

// Session is one Kafka client of a loop, from its start to its close.
type Session struct {
	Client *kgo.Client
	Admin  *kadm.Client
	loop   *Loop
}

// session runs one Kafka client until ctx ends, a fatal error, a reached
// bound, or an error that needs a new client (errRestartSession).
func (l *Loop) session(ctx context.Context, r *retry) error {
	s, txn, err := l.newSession()
	if err != nil {
		return err
	}
	defer l.close(s.Client, txn)
	produceTo, err := l.step.Start(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the brokers: not a failure
		}
		return err
	}
	if l.m.Lag != nil {
		lagCtx, stopLag := context.WithCancel(ctx)
		defer stopLag()
		go trackLag(lagCtx, s.Admin, l.cfg.Group, l.m.Lag, l.cfg.LagEvery, l.cfg.Logger)
	}
	guardParts := guardPartitions(produceTo)
	if txn != nil {
		if err := l.guardAtStart(ctx, s.Client, guardParts); err != nil {
			return err
		}
	}
	guard := false // due again after every transaction that did not commit
	for {
		if guard {
			// Before polling again after a transaction that did not
			// commit: an orphan its abort left on __consumer_offsets
			// would hold the next poll on UNSTABLE_OFFSET_COMMIT for
			// good, and one on an output partition must be gone before
			// the next produce. Nothing is polled while it fails.
			if err := l.cfg.BeforeProduce(ctx, s.Client, guardParts); err != nil {
				if stop, err := r.after(ctx, fmt.Errorf("orphaned-transaction guard: %w", err)); stop {
					return err
				}
				continue
			}
			guard = false
		}
		pollStart := time.Now()
		fetches := s.Client.PollRecords(ctx, l.cfg.MaxPollRecords)
		if txn != nil {
			fetches = l.topUp(ctx, s.Client, fetches)
		}
		if ctx.Err() != nil || fetches.IsClientClosed() {
			// Nothing of this poll was produced: its records stay
			// uncommitted and are read again by whoever owns them next.
			return nil
		}
		err := l.fetchErrors(fetches)
		polled := fetches.NumRecords() // markers included: trim drops them
		if err == nil && polled > 0 {
			if txn != nil {
				var committed bool
				committed, err = l.transact(ctx, txn, fetches, txnTimes{pollStart: pollStart, pollEnd: time.Now()})
				guard = !committed && l.cfg.BeforeProduce != nil
			} else {
				err = l.handleThenCommit(ctx, s.Client, fetches)
			}
		}
		if txn == nil {
			s.Client.AllowRebalance()
		}
		if err == nil && polled == 0 {
			continue // an empty poll neither clears a failure nor resets the backoff
		}
		if errors.Is(err, errRestartSession) {
			return err
		}
		if err == nil && polled > 0 && l.boundReached(s.Client) {
			l.cfg.Logger.Info("bounded run complete")
			return nil
		}
		if stop, err := r.after(ctx, err); stop {
			return err
		}
	}
}

// guardAtStart runs the orphaned-transaction guard first in a session,
// before the first poll and before anything asks the client for its
// producer ID: an orphan on __consumer_offsets holds the group's offsets
// unstable, so the first poll would wait on it for good, and one on a
// partition the step produces to must be gone before the session's first
// produce. A transaction coordinator that is not ready yet (a fresh
// cluster) is waited for, up to TopicWait, with one INFO line: that is
// start-up, not a failed batch. Any other failure that is not fatal
// restarts the session.
func (l *Loop) guardAtStart(ctx context.Context, cl *kgo.Client, parts map[string][]int32) error {
	if l.cfg.BeforeProduce == nil {
		return nil
	}
	deadline := time.Now().Add(max(l.cfg.TopicWait, 0))
	logged := false
	for wait := l.cfg.BackoffMin; ; wait = min(2*wait, time.Second) {
		err := l.cfg.BeforeProduce(ctx, cl, parts)
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrFatal):
			return err
		case coordinatorStarting(err) && time.Now().Before(deadline):
			if !logged {
				logged = true
				l.cfg.Logger.Info("waiting for the transaction coordinator to be ready; nothing was polled or produced yet",
					"err", err, "topic_wait", l.cfg.TopicWait)
			}
			if Sleep(ctx, wait) != nil {
				return nil
			}
		default:
			// Nothing was polled or produced yet: a new session (after a
			// backoff) runs the guard again.
			return fmt.Errorf("%w: orphaned-transaction guard: %w", errRestartSession, err)
		}
	}
}

// guardPartitions is what the orphaned-transaction guard checks: the
// partitions the step produces to, and all of __consumer_offsets (the
// group's partition is among them), where a transaction's offsets live.
func guardPartitions(produceTo map[string][]int32) map[string][]int32 {
	parts := make(map[string][]int32, len(produceTo)+1)
	for t, ps := range produceTo {
		parts[t] = ps
	}
	parts[ConsumerOffsetsTopic] = nil
	return parts
}

// newSession makes the session's client: a GroupTransactSession in
// Transactional mode (txn non-nil), else a plain client.
func (l *Loop) newSession() (*Session, *kgo.GroupTransactSession, error) {
	s := &Session{loop: l}
	var txn *kgo.GroupTransactSession
	var err error
	if l.cfg.Mode == Transactional {
		if txn, err = kgo.NewGroupTransactSession(l.kafkaOpts()...); err == nil {
			s.Client = txn.Client()
		}
	} else {
		s.Client, err = kgo.NewClient(l.kafkaOpts()...)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: kafka client: %w", ErrFatal, err)
	}
	s.Admin = kadm.NewClient(s.Client)
	return s, txn, nil
}

// kafkaOpts are the client options: the loop's, the step's, the user's.
func (l *Loop) kafkaOpts() []kgo.Opt {
	c := &l.cfg
	reset := kgo.NewOffset().AtStart()
	if c.StartAtEnd {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers are read as records so that their offsets are
		// committed too: otherwise a caught-up partition shows a lag of
		// 1 (its last commit marker), and a bound that falls on a marker
		// is never reached. The loop drops them before the step sees a
		// batch.
		kgo.KeepControlRecords(),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.OnPartitionsAssigned(l.assigned),
		kgo.WithLogger(KgoLogger{c.Logger}),
		// On Kafka 4 the first produce after a commit can meet
		// CONCURRENT_TRANSACTIONS; franz-go retries it after a metadata
		// refresh, which it would otherwise do at most every 5 s.
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if rv, ok := l.step.(Revoker); ok {
		opts = append(opts, kgo.OnPartitionsRevoked(rv.Revoked))
	}
	if c.Mode == Transactional {
		opts = append(opts, kgo.TransactionalID(c.TransactionalID), kgo.TransactionTimeout(c.TransactionTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else {
		// No rebalance between a poll and the commit after it: records are
		// only read again after a crash or a failed commit.
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	}
	if c.Static {
		opts = append(opts, kgo.InstanceID(c.InstanceID))
	}
	if l.m.Phases != nil && c.Mode == Transactional {
		opts = append(opts, kgo.WithHooks(&l.clock))
	}
	if c.Registerer != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics(c.MetricsNamespace, kprom.Registerer(c.Registerer))))
	}
	opts = append(opts, c.ClientOpts...)
	return append(opts, c.KafkaOpts...)
}

func (l *Loop) assigned(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	if a, ok := l.step.(Assigner); ok {
		a.Assigned(ctx, cl, parts)
	}
	l.joined.Store(true)
}

// boundReached reports whether a bounded run has committed its whole range.
func (l *Loop) boundReached(cl *kgo.Client) bool {
	b := l.cfg.Bound
	return b != nil && b.Done != nil && b.Done(cl.CommittedOffsets())
}

// fetchErrors logs fetch errors and returns the fatal ones.
func (l *Loop) fetchErrors(fetches kgo.Fetches) error {
	for _, fe := range fetches.Errors() {
		if IsFatalKafka(fe.Err) {
			return fmt.Errorf("%w: %w", ErrFatal, &FetchError{Topic: fe.Topic, Partition: fe.Partition, Err: fe.Err})
		}
		l.cfg.Logger.Warn("fetch error; retrying", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	return nil
}

// close leaves the group and closes the client within the shutdown bound.
// Every batch has ended its transaction (or committed its offsets) by now,
// so leaving hands the partitions over at once instead of after a session
// timeout.
func (l *Loop) close(cl *kgo.Client, txn *kgo.GroupTransactSession) {
	timeout := l.cfg.ShutdownTimeout
	done := make(chan struct{})
	go func() {
		defer close(done)
		if txn == nil {
			// A poll blocks rebalances until AllowRebalance; closing
			// must allow them too, or leaving the group waits for a
			// poll that never comes.
			cl.CloseAllowingRebalance()
			return
		}
		// A session given up on after a failed EndTxn may still hold
		// records it keeps retrying; they must never reach a broker after
		// the next session has fenced this one's transaction, so they are
		// failed (and in-flight requests awaited) before the client goes.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_ = cl.AbortBufferedRecords(ctx)
		cancel()
		txn.Close()
	}()
	select {
	case <-done:
		l.cfg.Logger.Info(l.cfg.Name + " stopped: left the group and closed the client")
	case <-time.After(timeout):
		l.cfg.Logger.Error(l.cfg.Name+" stop: leaving the group took longer than the shutdown timeout; exiting anyway", "timeout", timeout)
	}
}
