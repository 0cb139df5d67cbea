package eos

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMarkerWait bounds how long a transaction's first produce waits
// for the markers of the transaction before it (Config.MarkerWait): the
// broker's own retry of the produce, add.partitions.to.txn.retry.backoff.ms,
// is 20 ms by default, and waiting longer than it gains nothing.
const DefaultMarkerWait = 20 * time.Millisecond

// markers is the wait for the coordinator to finish one committed
// transaction: done is closed once DescribeTransactions no longer shows
// it PrepareCommit or PrepareAbort, after MarkerWait, or when asking fails.
//
// Why: with transactions v2 (Kafka 4.0 and later) EndTxn returns once the
// coordinator has written PrepareCommit; the markers come after. A produce
// of the next transaction that reaches its partition's leader before they
// are done is held there for the broker's retry timer (20 ms by default,
// until KAFKA-20000), so at a low rate about one transaction in five waited
// 20 ms for nothing (docs/latency.md). Asking the coordinator is one round
// trip of well under a millisecond, and the asking starts as soon as EndTxn
// returns, while the next batch is polled and numbered.
type markers struct {
	done   chan struct{}
	waited atomic.Bool // the first produce has waited
}

// awaitMarkers starts asking the coordinator, on cl, whether the
// transaction EndTxn just committed has its markers written; nil when
// MarkerWait is off.
func (l *Loop) awaitMarkers(ctx context.Context, cl *kgo.Client) *markers {
	if l.cfg.MarkerWait <= 0 {
		return nil
	}
	m := &markers{done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.MarkerWait)
	go func() {
		defer close(m.done)
		defer cancel()
		adm := kadm.NewClient(cl)
		for ctx.Err() == nil {
			txns, err := adm.DescribeTransactions(ctx, l.cfg.TransactionalID)
			if err != nil {
				return // the broker's retry timer is the worst case: never fail a batch for this
			}
			st, ok := txns[l.cfg.TransactionalID]
			if !ok || st.Err != nil || (st.State != "PrepareCommit" && st.State != "PrepareAbort") {
				return
			}
		}
	}()
	return m
}

// wait holds the transaction's first produce until the markers of the one
// before it are written (or the wait ends); later produces pass at once.
func (m *markers) wait(ctx context.Context) {
	if m == nil || m.waited.Load() {
		return
	}
	select {
	case <-m.done:
	case <-ctx.Done():
	}
	m.waited.Store(true)
}
