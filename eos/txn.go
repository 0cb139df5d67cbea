package eos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNewSession, wrapped in the error of a Step's Process, asks for a new
// session after the abort: a new client, and Step.Start again (for what a
// client learns once, such as the producer's record-batch limits).
var ErrNewSession = errRestartSession

// Tx is the open transaction of one batch.
//
// Its records' promise is one function for the whole transaction, bound
// once: a closure per record (what kgo.FirstErrPromise and a wrapper
// around it cost) was two allocations a record, about 4% of the worker's
// CPU with the garbage collector's share.
type Tx struct {
	sess    *kgo.GroupTransactSession
	markers *markers                   // the last transaction's markers, which the first produce waits for
	refused atomic.Pointer[kgo.Record] // the first record the brokers refused for want of a right

	pending sync.WaitGroup // records produced whose promise has not run
	failed  atomic.Bool
	err     error                    // the first record's failure, read after pending.Wait
	done    func(*kgo.Record, error) // t.finish
}

func newTx(sess *kgo.GroupTransactSession, m *markers) *Tx {
	t := &Tx{sess: sess, markers: m}
	t.done = t.finish
	return t
}

// Produce produces r in the transaction, asynchronously; a failure aborts
// the transaction at its end. Safe for concurrent use.
func (t *Tx) Produce(ctx context.Context, r *kgo.Record) {
	t.markers.wait(ctx)
	t.pending.Add(1)
	t.sess.Produce(ctx, r, t.done)
}

// ProduceSync produces r and waits for it (for baselines that measure the
// cost of waiting per record); a failure also aborts the transaction.
func (t *Tx) ProduceSync(ctx context.Context, r *kgo.Record) error {
	t.markers.wait(ctx)
	err := t.sess.ProduceSync(ctx, r).FirstErr()
	t.pending.Add(1)
	t.finish(r, err)
	return err
}

// finish is every record's promise. The first failure is kept, and the
// records still buffered are failed at once (as kgo.AbortingFirstErrPromise
// does): the transaction aborts anyway, so they need not wait their turn.
func (t *Tx) finish(r *kgo.Record, err error) {
	defer t.pending.Done()
	if err == nil {
		return
	}
	t.note(r, err)
	if t.failed.CompareAndSwap(false, true) {
		t.err = err
		t.pending.Add(1)
		go func() {
			defer t.pending.Done()
			t.sess.Client().AbortBufferedRecords(context.Background())
		}()
	}
}

// Err waits until every record produced has its promise run, and returns
// the first failure among them.
func (t *Tx) Err() error {
	t.pending.Wait()
	return t.err
}

// note keeps the first record refused for want of a right: its topic is
// what the error line names.
func (t *Tx) note(r *kgo.Record, err error) {
	if err != nil && kafkaacl.Is(err) {
		t.refused.CompareAndSwap(nil, r)
	}
}

// Flush waits until every record produced so far in the transaction is
// acknowledged or failed (a failure still aborts the transaction at its
// end), so that the next record produced starts a record batch of its own.
func (t *Tx) Flush(ctx context.Context) error {
	return t.sess.Client().Flush(ctx)
}

// transact runs one batch as one transaction: begin, the step, and one
// commit of the step's records and the consumed offsets.
// times carries the poll's marks; the rest are taken here for
// Metrics.Phases.
func (l *Loop) transact(ctx context.Context, sess *kgo.GroupTransactSession, fetches kgo.Fetches, times txnTimes) (bool, error) {
	if err := sess.Begin(); err != nil {
		return false, l.txnError("begin transaction", err)
	}
	// The transaction ends with its own bound even when ctx is cancelled
	// mid-batch: cancelling End would leave the client in an unknown
	// state, while ending it lets a shutdown commit or abort cleanly.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ShutdownTimeout)
	defer cancel()

	tx := l.newTx(sess)
	data := l.trim(fetches)
	if data {
		if err := l.step.Process(ctx, tx, fetches); err != nil {
			// End with TryAbort also rewinds the consumer to the
			// committed offsets.
			_, aerr := sess.End(endCtx, kgo.TryAbort)
			l.abort(true)
			err = l.rerouted(err)
			switch {
			case aerr == nil:
				return false, err
			case errors.Is(err, ErrFatal):
				l.cfg.Logger.Error("abort transaction", "err", aerr)
				return false, err
			}
			// The client could not abort: its producer ID is dead (the
			// coordinator aborted the transaction for its timeout and
			// bumped the epoch while the step ran, so a produce met
			// INVALID_PRODUCER_EPOCH and the abort PRODUCER_FENCED)
			// or in an unknown state. Every later request with it,
			// the orphan guard's first, fails the same way; a new
			// session initializes the producer ID again.
			return false, fmt.Errorf("%w; %w", err, l.txnError("abort transaction", aerr))
		}
	}
	times.processEnd = time.Now()
	if l.m.Phases != nil && tx.Err() == nil {
		// End flushes first anyway; flushing here only splits the time.
		// An error is End's to report (it flushes again).
		_ = sess.Client().Flush(endCtx)
	}
	times.flushEnd = time.Now()
	committed, err := sess.End(endCtx, tx.Err() == nil)
	times.end = time.Now()
	switch {
	case err != nil:
		// Unknown on the broker; the next session fences it, so it never
		// commits.
		l.abort(data)
		return false, l.txnError("end transaction", err)
	case !committed:
		l.abort(data)
		if perr := tx.Err(); perr != nil {
			if r := tx.refused.Load(); r != nil {
				// A missing right does not pass by retrying the batch.
				return false, fmt.Errorf("%w: %w", ErrFatal, kafkaacl.Classify(
					fmt.Errorf("produce to %s: %w", r.Topic, perr), "Produce",
					kafkaacl.Target{Type: kafkaacl.Topic, Name: r.Topic, Operation: "WRITE"}, l.txnTarget()))
			}
			if errors.Is(perr, kerr.ProducerFenced) {
				// The client's producer ID is dead: only a new
				// session can produce again.
				return false, l.txnError("produce", perr)
			}
			return false, l.rerouted(fmt.Errorf("%w: produce: %w", ErrCommitAborted, perr))
		}
		// A rebalance: the session aborted and rewound to the committed
		// offsets; whoever owns the partitions now handles the records.
		l.cfg.Logger.Info(l.cfg.Name+" transaction aborted by a rebalance; its records will be processed again", "records", fetches.NumRecords())
		return false, nil
	}
	l.markers = l.awaitMarkers(ctx, sess.Client())
	l.countCommit()
	l.observe(times)
	if !data {
		return true, nil
	}
	return true, l.step.Committed()
}

// newTx is the open transaction of a batch, which takes the last
// commit's markers to wait for.
func (l *Loop) newTx(sess *kgo.GroupTransactSession) *Tx {
	tx := newTx(sess, l.markers)
	l.markers = nil
	return tx
}

// rerouted marks err, the failure of a batch the step saw abort, to be
// retried without a backoff when the step says its next attempt goes
// another way (Rerouter).
func (l *Loop) rerouted(err error) error {
	if rr, ok := l.step.(Rerouter); ok && rr.Rerouted() && !errors.Is(err, ErrFatal) {
		return fmt.Errorf("%w: %w", errRetryAtOnce, err)
	}
	return err
}

// handleThenCommit is a batch in AtLeastOnce mode: the step, then the
// offsets. A failed offset commit is not retried here: the step has
// handled the records, and it must expect them again after a crash anyway.
func (l *Loop) handleThenCommit(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) error {
	all := fetches.Records() // markers included, so their offsets are committed
	if l.trim(fetches) {
		if err := l.step.Process(ctx, nil, fetches); err != nil {
			l.abort(true)
			return err
		}
		l.countCommit()
		if err := l.step.Committed(); err != nil {
			return err
		}
	}
	// The batch is written: a stop that arrives now must not cancel its
	// commit, or a graceful restart writes the batch again. The commit is
	// bounded by the shutdown timeout instead.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ShutdownTimeout)
	defer cancel()
	if err := cl.CommitRecords(cctx, all...); err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	return nil
}

func (l *Loop) countCommit() {
	l.committed.Add(1)
	if l.m.Transactions != nil {
		l.m.Transactions.WithLabelValues("committed").Inc()
	}
}

// abort is the one way a batch that did not commit ends, whatever failed
// (the step, a produce, EndTxn, a rebalance; in AtLeastOnce mode the
// step): it is counted once, and the step, if it saw the batch, is told.
func (l *Loop) abort(stepSaw bool) {
	l.aborted.Add(1)
	if l.m.Transactions != nil {
		l.m.Transactions.WithLabelValues("aborted").Inc()
	}
	if stepSaw {
		l.step.Aborted()
	}
}

// trim drops, in place, what the step must not see: transaction markers
// and records past a Bound. Their offsets are still committed, since the
// client tracks what it polled, not what the step saw. It reports whether
// any record is left.
func (l *Loop) trim(fetches kgo.Fetches) bool {
	var stop map[string]map[int32]int64
	if l.cfg.Bound != nil {
		stop = l.cfg.Bound.Stop
	}
	left := false
	for i := range fetches {
		for j := range fetches[i].Topics {
			t := &fetches[i].Topics[j]
			for k := range t.Partitions {
				p := &t.Partitions[k]
				end, bounded := stop[t.Topic][p.Partition]
				kept := p.Records[:0]
				for _, r := range p.Records {
					if r.Attrs.IsControl() || (bounded && r.Offset >= end) {
						continue
					}
					kept = append(kept, r)
				}
				p.Records = kept
				left = left || len(kept) > 0
			}
		}
	}
	return left
}
