package idgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Numberer issues increasing numbers in blocks. *Generator is one, and so
// is *Prefetcher.
type Numberer interface {
	AppendN(ctx context.Context, dst []int64, n int) ([]int64, error)
}

// Prefetcher reserves numbers ahead of need, in the background, so that a
// batch finds them ready instead of waiting for Redis round trips and
// millisecond boundaries on the transaction's critical path.
//
// One goroutine is the only caller of the underlying Numberer and hands
// blocks over in the order it reserved them, so the numbers a worker uses
// still strictly increase. A block older than the maximum age is thrown
// away unused (a gap, like the numbers of an aborted transaction), so a
// number's time is never more than that behind the moment it is assigned.
type Prefetcher struct {
	src    Numberer
	chunk  int
	maxAge time.Duration
	now    func() time.Time

	blocks chan prefetched
	cur    prefetched    // the block being handed out
	mu     sync.Mutex    // serializes AppendN
	gen    atomic.Uint64 // blocks reserved before the last Forget are of an older generation

	cancel context.CancelFunc
	done   chan struct{}
}

type prefetched struct {
	ids []int64
	at  time.Time
	gen uint64 // the generation when the reservation started
	err error
}

// NewPrefetcher starts reserving from src until Close, in blocks of chunk
// numbers (best: one millisecond's capacity, so a block never waits on a
// boundary it need not), keeping about ahead numbers ready and none older
// than maxAge.
func NewPrefetcher(src Numberer, ahead, chunk int, maxAge time.Duration) *Prefetcher {
	return newPrefetcher(src, ahead, chunk, maxAge, time.Now)
}

// newPrefetcher is NewPrefetcher with a clock, for tests.
func newPrefetcher(src Numberer, ahead, chunk int, maxAge time.Duration, now func() time.Time) *Prefetcher {
	chunk = max(chunk, 1)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prefetcher{
		src: src, chunk: chunk, maxAge: maxAge, now: now,
		blocks: make(chan prefetched, max(ahead/chunk, 1)),
		cancel: cancel, done: make(chan struct{}),
	}
	go p.run(ctx)
	return p
}

// run reserves blocks and queues them. When a reservation fails it queues
// the error (the worker aborts its batch) and tries again after a pause.
func (p *Prefetcher) run(ctx context.Context) {
	defer close(p.done)
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		gen := p.gen.Load()
		ids, err := p.src.AppendN(ctx, make([]int64, 0, p.chunk), p.chunk)
		if err != nil && ctx.Err() != nil {
			return
		}
		select {
		case p.blocks <- prefetched{ids: ids, at: p.now(), gen: gen, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// AppendN implements Numberer: it appends n numbers from the queued blocks,
// waiting for more when the queue runs dry. On error it returns dst
// unchanged; the numbers already taken become gaps.
func (p *Prefetcher) AppendN(ctx context.Context, dst []int64, n int) ([]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := len(dst)
	for len(dst)-start < n {
		if len(p.cur.ids) == 0 || p.now().Sub(p.cur.at) > p.maxAge || p.cur.gen != p.gen.Load() {
			select {
			case b := <-p.blocks:
				if b.err != nil {
					return dst[:start], b.err
				}
				p.cur = b
			case <-ctx.Done():
				return dst[:start], ctx.Err()
			case <-p.done:
				return dst[:start], errPrefetcherClosed
			}
			continue
		}
		k := min(n-(len(dst)-start), len(p.cur.ids))
		dst = append(dst, p.cur.ids[:k]...)
		p.cur.ids = p.cur.ids[k:]
	}
	return dst, nil
}

var errPrefetcherClosed = errors.New("idgen: number prefetcher closed")

// Forget makes every number reserved so far unusable (gaps): only blocks
// whose reservation starts after Forget are handed out. A worker calls it
// when it is assigned partitions, whose previous owner may have issued
// numbers after some that are queued here.
func (p *Prefetcher) Forget() { p.gen.Add(1) }

// Close stops reserving and waits for the goroutine to end. Numbers still
// queued are never used.
func (p *Prefetcher) Close() {
	p.cancel()
	<-p.done
}
