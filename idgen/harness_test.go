package idgen

import (
	"context"
	"sync"
	"testing"
	"time"
)

// drawConcurrently runs one goroutine per generator, each drawing total
// numbers in calls of batch, and returns what each drew in order.
func drawConcurrently(t *testing.T, gens []*Generator, total, batch int) [][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([][]int64, len(gens))
	errs := make([]error, len(gens))
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]int64, 0, total)
			for len(ids) < total {
				var err error
				ids, err = g.AppendN(ctx, ids, min(batch, total-len(ids)))
				if err != nil {
					errs[i] = err
					return
				}
			}
			out[i] = ids
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("generator %d: %v", i, err)
		}
	}
	return out
}

// audit is what checkNumbers found in a set of numbers.
type audit struct {
	total, duplicates, spilled, overfull, notIncreasing int
	busiest                                             int // most numbers seen in one millisecond
}

// checkNumbers decodes every number and counts duplicates, numbers that do
// not decode to the (server, worker) they were drawn for (a sequence that
// spilled into the worker bits), milliseconds holding more than the layout
// allows, and per-drawer sequences that do not strictly increase.
func checkNumbers(l Layout, server, worker int64, drawn [][]int64) audit {
	var a audit
	seen := make(map[int64]struct{})
	perMs := make(map[int64]int)
	for _, ids := range drawn {
		for i, id := range ids {
			a.total++
			if i > 0 && id <= ids[i-1] {
				a.notIncreasing++
			}
			if _, dup := seen[id]; dup {
				a.duplicates++
			}
			seen[id] = struct{}{}
			p, err := l.Decompose(id)
			if err != nil || p.Server != server || p.Worker != worker {
				a.spilled++
			}
			perMs[p.UnixMs]++
		}
	}
	for _, n := range perMs {
		a.busiest = max(a.busiest, n)
		if int64(n) > l.PerMillisecond() {
			a.overfull++
		}
	}
	return a
}

// requireClean fails the test unless the audit found nothing wrong.
func requireClean(t *testing.T, a audit, want int) {
	t.Helper()
	if a.total != want || a.duplicates != 0 || a.spilled != 0 || a.overfull != 0 || a.notIncreasing != 0 {
		t.Fatalf("want %d clean numbers, got %+v", want, a)
	}
	t.Logf("%d numbers: 0 duplicates, busiest millisecond held %d", a.total, a.busiest)
}

// pausingSequencer sleeps before every reservation: a GC pause or a slow
// network between a client deciding to ask and Redis answering.
type pausingSequencer struct {
	Sequencer
	pause func() time.Duration
}

func (p pausingSequencer) Reserve(ctx context.Context, req Request) (Block, error) {
	time.Sleep(p.pause())
	return p.Sequencer.Reserve(ctx, req)
}

// countingSequencer counts reservations, full or not.
type countingSequencer struct {
	Sequencer
	mu          sync.Mutex
	calls, full int
}

func (c *countingSequencer) Reserve(ctx context.Context, req Request) (Block, error) {
	b, err := c.Sequencer.Reserve(ctx, req)
	c.mu.Lock()
	c.calls++
	if err == nil && b.Count == 0 {
		c.full++
	}
	c.mu.Unlock()
	return b, err
}

func mustGenerator(t testing.TB, s Settings) *Generator {
	t.Helper()
	g, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tinyLayout has 2 sequence bits: 4 numbers a millisecond, so any real load
// overflows every millisecond.
func tinyLayout() Layout {
	return Layout{Epoch: DefaultEpoch, TimeBits: 41, ServerBits: 10, WorkerBits: 10, SequenceBits: 2}
}
