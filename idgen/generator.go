package idgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Request asks a Sequencer for up to N sequence numbers of one millisecond
// for one (server, worker) pair under one layout.
type Request struct {
	Layout   Layout
	LayoutID string // Layout's fingerprint; the Generator fills it once
	Server   int64
	Worker   int64
	N        int64
}

// Block is a reservation: Count sequence numbers First..First+Count-1 of Unix
// millisecond UnixMs. A Block with Count 0 means the millisecond is full (or
// the sequencer's clock is behind the last millisecond it issued): ask again
// after Wait, which runs to the next millisecond boundary by the sequencer's
// clock.
type Block struct {
	UnixMs int64
	First  int64
	Count  int64
	Wait   time.Duration
}

// A Sequencer reserves blocks of sequence numbers. An implementation must
// never hand out the same (millisecond, server, worker, sequence) twice, and
// the blocks it hands one (server, worker) pair must increase.
type Sequencer interface {
	Reserve(ctx context.Context, req Request) (Block, error)
}

// shortWait is the longest wait slept with shortSleep rather than a timer:
// a millisecond boundary is at most 1 ms away.
const shortWait = 2 * time.Millisecond

// DefaultMaxWait is the longest a Generator waits for one millisecond to
// begin before it reports ErrClockBackwards.
const DefaultMaxWait = 5 * time.Second

// Settings configures a Generator.
type Settings struct {
	// Layout is the bit layout; the zero Layout means DefaultLayout. An
	// invalid layout is an error from New.
	Layout Layout
	// ServerID must fit the layout's server field, or New fails with a
	// *FieldError wrapping ErrServerID. There is no default: the caller must
	// choose, since two deployments left on one default issue duplicates.
	ServerID int64
	// WorkerID must fit the layout's worker field (ErrWorkerID otherwise).
	WorkerID int64
	// Sequencer reserves sequence numbers; nil is ErrNoSequencer.
	Sequencer Sequencer
	// MaxWait bounds one wait for the next millisecond, overriding the
	// default 5s. A sequencer asking for longer (its clock stepped back, or
	// a layout change set a floor far ahead) is reported as
	// ErrClockBackwards instead of stalling silently.
	MaxWait time.Duration
}

// Stats counts a generator's work since it was created.
type Stats struct {
	Numbers      uint64        // numbers issued
	Reservations uint64        // sequencer round trips that returned numbers
	Waits        uint64        // times a full millisecond made it wait
	Waited       time.Duration // total time spent waiting
}

// Generator issues numbers for one (server, worker) pair. It is safe for
// concurrent use; the numbers it issues strictly increase in the order its
// calls return.
type Generator struct {
	layout  Layout
	req     Request
	seq     Sequencer
	maxWait time.Duration

	mu    sync.Mutex
	last  int64 // last number issued, -1 before the first
	timer *time.Timer

	numbers, reservations, waits, waited atomic.Uint64
}

// New validates the settings and returns a Generator.
func New(s Settings) (*Generator, error) {
	if s.Layout == (Layout{}) {
		s.Layout = DefaultLayout()
	}
	if err := s.Layout.Validate(); err != nil {
		return nil, err
	}
	if err := s.Layout.CheckServer(s.ServerID); err != nil {
		return nil, err
	}
	if err := s.Layout.CheckWorker(s.WorkerID); err != nil {
		return nil, err
	}
	if s.Sequencer == nil {
		return nil, ErrNoSequencer
	}
	if s.MaxWait <= 0 {
		s.MaxWait = DefaultMaxWait
	}
	return &Generator{
		layout:  s.Layout,
		req:     Request{Layout: s.Layout, LayoutID: s.Layout.fingerprint(), Server: s.ServerID, Worker: s.WorkerID},
		seq:     s.Sequencer,
		maxWait: s.MaxWait,
		last:    -1,
	}, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// Stats returns the generator's counters.
func (g *Generator) Stats() Stats {
	return Stats{
		Numbers:      g.numbers.Load(),
		Reservations: g.reservations.Load(),
		Waits:        g.waits.Load(),
		Waited:       time.Duration(g.waited.Load()),
	}
}

// Next returns one number.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	var one [1]int64
	ids, err := g.AppendN(ctx, one[:0], 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN returns n numbers in increasing order.
func (g *Generator) NextN(ctx context.Context, n int) ([]int64, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrCount, n)
	}
	ids, err := g.AppendN(ctx, make([]int64, 0, n), n)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// AppendN appends n increasing numbers to dst. It reserves them in blocks,
// one sequencer round trip per block, and when a millisecond is full it
// sleeps to the boundary the sequencer reports. On error it returns dst
// unchanged: numbers already reserved are left as gaps, never handed out.
func (g *Generator) AppendN(ctx context.Context, dst []int64, n int) ([]int64, error) {
	if n <= 0 {
		return dst, fmt.Errorf("%w: %d", ErrCount, n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	start, last := len(dst), g.last
	for need := int64(n); need > 0; {
		req := g.req
		req.N = need
		b, err := g.seq.Reserve(ctx, req)
		if err != nil {
			return dst[:start], fmt.Errorf("idgen: reserve sequence for server %d worker %d: %w", g.req.Server, g.req.Worker, err)
		}
		if b.Count == 0 {
			if err := g.wait(ctx, b.Wait); err != nil {
				return dst[:start], err
			}
			continue
		}
		if b.Count < 0 || b.Count > need || b.First < 0 || b.First+b.Count-1 > g.layout.MaxSequence() {
			return dst[:start], fmt.Errorf("%w: %+v for %d numbers", ErrBadReservation, b, need)
		}
		if err := g.layout.CheckTime(b.UnixMs); err != nil {
			return dst[:start], err
		}
		first := g.layout.compose(b.UnixMs-g.layout.EpochMs(), g.req.Server, g.req.Worker, b.First)
		if first <= last {
			// A sequencer that broke its contract must not make us issue
			// a duplicate: refuse the whole call.
			return dst[:start], fmt.Errorf("%w: %d after %d", ErrNotIncreasing, first, last)
		}
		for i := int64(0); i < b.Count; i++ {
			dst = append(dst, first+i)
		}
		last = first + b.Count - 1
		need -= b.Count
		g.reservations.Add(1)
	}
	g.last = last
	g.numbers.Add(uint64(n))
	return dst, nil
}

// wait sleeps for d, the time the sequencer says the next millisecond is
// away, on a timer rather than a spin, and ends early when ctx is done.
func (g *Generator) wait(ctx context.Context, d time.Duration) error {
	if d > g.maxWait {
		return fmt.Errorf("%w: the sequencer asks to wait %s for server %d worker %d (over the %s bound); check the Redis host's clock",
			ErrClockBackwards, d, g.req.Server, g.req.Worker, g.maxWait)
	}
	g.waits.Add(1)
	if d <= 0 {
		return ctx.Err()
	}
	start := time.Now()
	if d <= shortWait {
		// A wait for the next millisecond: short enough that a
		// cancellation is seen right after it, and too short for the
		// runtime's timers to hit.
		if err := ctx.Err(); err != nil {
			return err
		}
		shortSleep(d)
		g.waited.Add(uint64(time.Since(start)))
		return ctx.Err()
	}
	if g.timer == nil {
		g.timer = time.NewTimer(d)
	} else {
		g.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		g.timer.Stop()
		return ctx.Err()
	case <-g.timer.C:
		g.waited.Add(uint64(time.Since(start)))
		return nil
	}
}
