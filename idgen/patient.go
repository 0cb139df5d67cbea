package idgen

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// DefaultGiveUp is how long a Patient sequencer keeps asking a Redis that
// does not answer, by default: longer than a Sentinel or Cluster failover
// takes (a few seconds past the down-after or node timeout).
const DefaultGiveUp = 30 * time.Second

// Patient wraps seq so that a reservation that fails for a passing reason
// (Redis down, a failover under way, replicas that did not acknowledge in
// time) is asked again, with backoff from 10ms to 1s, until giveUp (0 means
// DefaultGiveUp) has passed since the last reservation that succeeded (or
// since the first try). Permanent errors (see Permanent) and a done
// context return at once. A failed attempt hands out nothing: a number is
// only ever taken from a reply received in full. onRetry, if not nil, hears
// of every failed attempt before the wait that follows it. It is safe for
// concurrent use.
func Patient(seq Sequencer, giveUp time.Duration, onRetry func(err error, wait time.Duration)) Sequencer {
	if giveUp <= 0 {
		giveUp = DefaultGiveUp
	}
	return &patient{seq: seq, giveUp: giveUp, onRetry: onRetry, now: time.Now}
}

type patient struct {
	seq     Sequencer
	giveUp  time.Duration
	onRetry func(error, time.Duration)
	lastOK  atomic.Int64 // Unix ns of the last success, 0 before the first try
	now     func() time.Time
}

func (p *patient) Reserve(ctx context.Context, req Request) (Block, error) {
	p.lastOK.CompareAndSwap(0, p.now().UnixNano())
	backoff := 10 * time.Millisecond
	for {
		b, err := p.seq.Reserve(ctx, req)
		if err == nil {
			p.lastOK.Store(p.now().UnixNano())
			return b, nil
		}
		if Permanent(err) || ctx.Err() != nil {
			return b, err
		}
		if since := p.now().Sub(time.Unix(0, p.lastOK.Load())); since+backoff > p.giveUp {
			return b, fmt.Errorf("no reservation for %s, giving up: %w", since.Round(time.Millisecond), err)
		}
		if p.onRetry != nil {
			p.onRetry(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return Block{}, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}
