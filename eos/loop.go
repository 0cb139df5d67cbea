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

	"github.com/flakestream/flakestream/internal/kafkaacl"
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

// Rerouter is a Step that may know, once a batch aborted, that its next
// attempt takes another way around what failed (the worker sends a record
// a broker refused to its dead-letter topic): Rerouted, asked after
// Aborted, reports it, and the loop then tries the batch again at once.
// The backoff is for failures that pass with time; this one does not, and
// waiting for it only delays every record of the batch. The step must
// bound how often it reroutes one batch, since nothing else does.
type Rerouter interface {
	Rerouted() bool
}

// Assigner is a Step that wants to hear of newly assigned partitions.
type Assigner interface {
	Assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32)
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
	markers            *markers   // the last commit's, until the next transaction takes them
}

// New validates cfg and returns a loop that runs step and reports to m. It
// does not connect; Run does.
func New(cfg Config, step Step, m Metrics) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Loop{cfg: cfg, step: step, m: m}, nil
}

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
	what, session := l.cfg.Name+" batch aborted; its records will be processed again", l.transactional
	if l.cfg.Mode == AtLeastOnce {
		what, session = l.cfg.Name+" batch failed; retrying", l.atLeastOnce
	}
	r := &retry{min: l.cfg.BackoffMin, max: l.cfg.BackoffMax, cur: l.cfg.BackoffMin,
		log: l.cfg.Logger, last: &l.lastErr, what: what, check: l.fenceCheck}
	err := r.sessions(ctx, func() error {
		l.joined.Store(false)
		err := session(ctx, r)
		if errors.Is(err, errStopped) {
			return nil
		}
		return err
	})
	return kafkaacl.WithPrincipal(err, l.cfg.Principal)
}

// Session is one Kafka client of a loop, from its start to its close.
type Session struct {
	Client *kgo.Client
	Admin  *kadm.Client
	loop   *Loop
}

// errStopped ends a session that ctx stopped before it began polling.
var errStopped = errors.New("eos: stopped before the first poll")

// start begins a session on cl: the step's Start, then (until ctx ends)
// the lag gauge. It returns the partitions the step produces to.
func (l *Loop) start(ctx context.Context, cl *kgo.Client) (map[string][]int32, error) {
	s := &Session{Client: cl, Admin: kadm.NewClient(cl), loop: l}
	produceTo, err := l.step.Start(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errStopped // stopped while waiting for the brokers: not a failure
		}
		return nil, err
	}
	if l.m.Lag != nil {
		go trackLag(ctx, s.Admin, l.cfg.Group, l.m.Lag, l.cfg.LagEvery, l.cfg.Logger)
	}
	return produceTo, nil
}

// transactional runs one Transactional session: a GroupTransactSession
// whose every batch is one transaction, until ctx ends, a fatal error, a
// reached bound, or an error that needs a new client (errRestartSession).
func (l *Loop) transactional(ctx context.Context, r *retry) error {
	ctx, end := context.WithCancel(ctx) // ends the lag gauge with the session
	defer end()
	txn, err := kgo.NewGroupTransactSession(l.kafkaOpts(l.transactionalOpts())...)
	if err != nil {
		return fmt.Errorf("%w: kafka client: %w", ErrFatal, err)
	}
	defer l.closeTransactional(txn)
	l.markers = nil // the last session's, on its own client
	cl := txn.Client()
	produceTo, err := l.start(ctx, cl)
	if err != nil {
		return err
	}
	guardParts := guardPartitions(produceTo)
	if err := l.guardAtStart(ctx, cl, guardParts); err != nil {
		return err
	}
	guard := false // due again after every transaction that did not commit
	dirty := false // a transaction committed since the guard last ran
	for {
		if guard {
			// Before polling again after a transaction that did not
			// commit: an orphan its abort left on __consumer_offsets
			// would hold the next poll on UNSTABLE_OFFSET_COMMIT for
			// good, and one on an output partition must be gone before
			// the next produce. Nothing is polled while it fails. And
			// once a session is idle after a commit (poll): the member
			// given this one's partitions next must find their offsets
			// stable.
			if err := l.cfg.BeforeProduce(ctx, cl, guardParts); err != nil {
				if producerGone(err) {
					// The coordinator moved the producer's epoch
					// on under this client (it timed out the
					// guard's own cleanup transaction): retrying
					// with the client's epoch fails for good.
					return fmt.Errorf("%w: orphaned-transaction guard: %w", errRestartSession, err)
				}
				if stop, err := r.after(ctx, guardError(err)); stop {
					return err
				}
				continue
			}
			guard, dirty = false, false
		}
		pollStart := time.Now()
		fetches, idle := l.poll(ctx, cl, dirty)
		if idle {
			// Nothing to do for IdleGuard since the last commit: end
			// what a lost marker may have left pending (Config.IdleGuard).
			guard = true
			continue
		}
		if ctx.Err() != nil || fetches.IsClientClosed() {
			// Nothing of this poll was produced: its records stay
			// uncommitted and are read again by whoever owns them next.
			return nil
		}
		err := l.fetchErrors(fetches)
		polled := fetches.NumRecords() // markers included: trim drops them
		if err == nil && polled > 0 {
			var committed bool
			committed, err = l.transact(ctx, txn, fetches, txnTimes{pollStart: pollStart, pollEnd: time.Now()})
			guard = !committed && l.cfg.BeforeProduce != nil
			dirty = dirty || committed
		}
		if stop, err := l.next(ctx, r, cl, polled, err); stop {
			return err
		}
	}
}

// poll is a transactional session's poll, topped up (Loop.topUp). When
// dirty (a transaction committed since the guard last ran) and a guard is
// set, it waits at most IdleGuard for a record, and idle reports that none
// came: the caller runs the guard before it polls again.
func (l *Loop) poll(ctx context.Context, cl *kgo.Client, dirty bool) (fetches kgo.Fetches, idle bool) {
	if !dirty || l.cfg.BeforeProduce == nil || l.cfg.IdleGuard < 0 {
		return l.topUp(ctx, cl, cl.PollRecords(ctx, l.cfg.MaxPollRecords)), false
	}
	pctx, cancel := context.WithTimeout(ctx, l.cfg.IdleGuard)
	fetches = cl.PollRecords(pctx, l.cfg.MaxPollRecords)
	cancel()
	if ctx.Err() == nil && len(fetches) == 1 && isCtxFetch(fetches[0]) {
		return nil, true
	}
	return l.topUp(ctx, cl, fetches), false
}

// atLeastOnce runs one AtLeastOnce session: a plain group client that
// commits a batch's offsets once the step has handled it, until ctx ends,
// a fatal error or a reached bound.
func (l *Loop) atLeastOnce(ctx context.Context, r *retry) error {
	ctx, end := context.WithCancel(ctx) // ends the lag gauge with the session
	defer end()
	// No rebalance between a poll and the commit after it: records are
	// only read again after a crash or a failed commit.
	cl, err := kgo.NewClient(l.kafkaOpts([]kgo.Opt{kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll()})...)
	if err != nil {
		return fmt.Errorf("%w: kafka client: %w", ErrFatal, err)
	}
	defer l.closeAtLeastOnce(cl)
	if _, err := l.start(ctx, cl); err != nil {
		return err
	}
	for {
		fetches := cl.PollRecords(ctx, l.cfg.MaxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil // nothing of this poll was committed: it is read again
		}
		err := l.fetchErrors(fetches)
		polled := fetches.NumRecords()
		if err == nil && polled > 0 {
			err = l.handleThenCommit(ctx, cl, fetches)
		}
		cl.AllowRebalance()
		if stop, err := l.next(ctx, r, cl, polled, err); stop {
			return err
		}
	}
}

// next decides, after a poll of polled records whose batch ended with err,
// whether the session goes on (stop false) or returns ret.
func (l *Loop) next(ctx context.Context, r *retry, cl *kgo.Client, polled int, err error) (stop bool, ret error) {
	switch {
	case err == nil && polled == 0:
		return false, nil // an empty poll neither clears a failure nor resets the backoff
	case errors.Is(err, errRestartSession):
		return true, err
	case err == nil && l.boundReached(cl):
		l.cfg.Logger.Info("bounded run complete")
		return true, nil
	}
	return r.after(ctx, err)
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
		case errors.Is(err, ErrFatal), kafkaacl.Is(err):
			return guardError(err)
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

// guardError is a failed orphaned-transaction guard: fatal if a right is
// missing (retrying cannot grant it), else one to retry.
func guardError(err error) error {
	if kafkaacl.Is(err) && !errors.Is(err, ErrFatal) {
		return fmt.Errorf("%w: orphaned-transaction guard: %w", ErrFatal, err)
	}
	return fmt.Errorf("orphaned-transaction guard: %w", err)
}

// guardPartitions is what the orphaned-transaction guard ends open
// transactions on: the partitions the step produces to, and (named by
// __consumer_offsets, which the guard reaches through the client's group)
// the group's offsets partition, where a transaction's offsets live.
func guardPartitions(produceTo map[string][]int32) map[string][]int32 {
	parts := make(map[string][]int32, len(produceTo)+1)
	for t, ps := range produceTo {
		parts[t] = ps
	}
	parts[ConsumerOffsetsTopic] = nil
	return parts
}

// kafkaOpts are the client options: the loop's, the mode's, the step's,
// the user's.
func (l *Loop) kafkaOpts(mode []kgo.Opt) []kgo.Opt {
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
	opts = append(opts, mode...)
	if c.Static {
		opts = append(opts, kgo.InstanceID(c.InstanceID))
	}
	if c.Registerer != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics(c.MetricsNamespace, kprom.Registerer(c.Registerer))))
	}
	opts = append(opts, c.ClientOpts...)
	return append(opts, c.KafkaOpts...)
}

// transactionalOpts are the options of a Transactional session's client.
func (l *Loop) transactionalOpts() []kgo.Opt {
	c := &l.cfg
	opts := []kgo.Opt{kgo.TransactionalID(c.TransactionalID), kgo.TransactionTimeout(c.TransactionTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if l.m.Phases != nil {
		opts = append(opts, kgo.WithHooks(&l.clock))
	}
	return opts
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
			// A group error comes without a topic: the group's join,
			// heartbeat or offset fetch was refused.
			return fmt.Errorf("%w: %w", ErrFatal, kafkaacl.Classify(&FetchError{Topic: fe.Topic, Partition: fe.Partition, Err: fe.Err}, "Fetch",
				kafkaacl.Target{Type: kafkaacl.Topic, Name: fe.Topic, Operation: "READ"}, kafkaacl.Target{Type: kafkaacl.Group, Name: l.cfg.Group, Operation: "READ"}))
		}
		l.cfg.Logger.Warn("fetch error; retrying", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	return nil
}

// closeTransactional leaves the group and closes a Transactional
// session's client within the shutdown bound. Every batch has ended its
// transaction by now, so leaving hands the partitions over at once instead
// of after a session timeout.
func (l *Loop) closeTransactional(txn *kgo.GroupTransactSession) {
	l.closeWithin(func() {
		// A session given up on after a failed EndTxn may still hold
		// records it keeps retrying; they must never reach a broker after
		// the next session has fenced this one's transaction, so they are
		// failed (and in-flight requests awaited) before the client goes.
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.ShutdownTimeout)
		_ = txn.Client().AbortBufferedRecords(ctx)
		cancel()
		txn.Close()
	})
}

// closeAtLeastOnce leaves the group and closes an AtLeastOnce session's
// client within the shutdown bound. A poll blocks rebalances until
// AllowRebalance; closing must allow them too, or leaving the group waits
// for a poll that never comes.
func (l *Loop) closeAtLeastOnce(cl *kgo.Client) {
	l.closeWithin(cl.CloseAllowingRebalance)
}

// closeWithin runs closeFn, giving up on it after the shutdown timeout.
func (l *Loop) closeWithin(closeFn func()) {
	timeout := l.cfg.ShutdownTimeout
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeFn()
	}()
	select {
	case <-done:
		l.cfg.Logger.Info(l.cfg.Name + " stopped: left the group and closed the client")
	case <-time.After(timeout):
		l.cfg.Logger.Error(l.cfg.Name+" stop: leaving the group took longer than the shutdown timeout; exiting anyway", "timeout", timeout)
	}
}
