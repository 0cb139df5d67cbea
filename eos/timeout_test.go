package eos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos/txnguard"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// outlivesTimeout is a copyStep whose first batch outlives the transaction
// timeout: it produces one record, waits until the coordinator has aborted
// the transaction for its timeout (bumping the producer's epoch under it),
// and then produces one more, which the broker refuses at the old epoch
// (INVALID_PRODUCER_EPOCH); that error fails the batch.
type outlivesTimeout struct {
	*copyStep
	brokers []string
	txnID   string
	hung    atomic.Bool
	aborted atomic.Int32
}

func (o *outlivesTimeout) Process(ctx context.Context, tx *Tx, fetches kgo.Fetches) error {
	if o.hung.Swap(true) {
		return o.copyStep.Process(ctx, tx, fetches)
	}
	tx.Produce(ctx, &kgo.Record{Topic: o.out, Value: []byte("from the timed-out batch")})
	if err := tx.Flush(ctx); err != nil {
		return err
	}
	if err := o.waitTimedOut(ctx); err != nil {
		return err
	}
	// The step sees the refusal itself, as the worker does when it
	// produces a record alone, and fails the batch with it.
	return tx.ProduceSync(ctx, &kgo.Record{Topic: o.out, Value: []byte("after the timeout")})
}

func (o *outlivesTimeout) Aborted() { o.aborted.Add(1) }

// waitTimedOut waits until the coordinator no longer holds the open
// transaction: it aborted it for its timeout.
func (o *outlivesTimeout) waitTimedOut(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		txns, err := adm.DescribeTransactions(ctx, o.txnID)
		if err == nil && txns[o.txnID].State != "Ongoing" && txns[o.txnID].Err == nil {
			return nil
		}
		if err := Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// A batch that outlives the transaction timeout (a process stalled under
// load) is aborted by the coordinator, which bumps the producer's epoch:
// the loop aborts it on its side too, the orphaned-transaction guard runs
// again with a producer that works (not at the epoch the coordinator
// fenced), and every record then commits exactly once.
func TestBatchPastTheTransactionTimeoutRecovers(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	step := &outlivesTimeout{copyStep: &copyStep{out: "out"}, brokers: brokers, txnID: "flakestream-g-i"}
	l := guardedLoop(t, brokers, step, time.Second, nil, nil)
	runUntil(t, l, "every record after the timed-out batch", func() bool { return step.committed.Load() == 3 })
	if !step.hung.Load() || step.aborted.Load() == 0 {
		t.Fatalf("the timed-out batch was not aborted (hung %v, aborted %d)", step.hung.Load(), step.aborted.Load())
	}
	if n := countRecords(t, brokers, "out"); n != 3 {
		t.Fatalf("%d records committed on out, want 3", n)
	}
}

// The orphaned-transaction guard that runs after an aborted batch finds
// the producer's epoch moved on under its client (the coordinator timed
// out the guard's own cleanup transaction, modelled here by bumping the
// epoch from another client): its retries with the client's epoch would
// fail for good, so the session is replaced, and the new one's guard
// passes and every record commits exactly once.
func TestGuardWithAStaleEpochReplacesTheSession(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	var calls, fenced atomic.Int32
	step := &failOnce{copyStep: &copyStep{out: "out"}}
	l := guardedLoop(t, brokers, step, 0, func(ctx context.Context, cl *kgo.Client) error {
		if calls.Add(1) == 2 { // the guard after the aborted batch
			return bumpEpoch(ctx, brokers, cl)
		}
		return nil
	}, func(err error) {
		if errors.Is(err, kerr.ProducerFenced) {
			fenced.Add(1)
		}
	})
	runUntil(t, l, "every record after the stale guard", func() bool { return step.committed.Load() == 3 })
	if fenced.Load() != 1 || calls.Load() != 3 {
		t.Fatalf("the guard was fenced %d times in %d calls, want once in 3 (start, fenced after the abort, the new session's)", fenced.Load(), calls.Load())
	}
	if n := countRecords(t, brokers, "out"); n != 3 {
		t.Fatalf("%d records committed on out, want 3", n)
	}
}

// bumpEpoch moves cl's producer epoch on at the coordinator, from another
// client, as a transaction timeout does: cl still holds the old one.
func bumpEpoch(ctx context.Context, brokers []string, cl *kgo.Client) error {
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer other.Close()
	txnID, _ := cl.OptValue(kgo.TransactionalID).(string)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.TransactionTimeoutMillis = &txnID, pid, epoch, 10_000
	resp, err := req.RequestWith(ctx, other)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// guardedLoop is a loop of step on in, with the orphaned-transaction guard
// as BeforeProduce and the given transaction timeout (0: the default).
// before, if set, runs ahead of each check, and checked sees its result.
func guardedLoop(t *testing.T, brokers []string, step Step, timeout time.Duration, before func(context.Context, *kgo.Client) error, checked func(error)) *Loop {
	t.Helper()
	g, err := txnguard.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, TransactionTimeout: timeout,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		BeforeProduce: func(ctx context.Context, cl *kgo.Client, parts map[string][]int32) error {
			if before != nil {
				if err := before(ctx, cl); err != nil {
					return err
				}
			}
			_, err := g.Check(ctx, cl, parts)
			if checked != nil {
				checked(err)
			}
			return err
		}}
	l, err := New(cfg, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
