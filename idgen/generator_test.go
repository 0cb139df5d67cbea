package idgen

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewValidatesSettings(t *testing.T) {
	seq := NewMemorySequencer(nil)
	cases := []struct {
		name string
		s    Settings
		want error
	}{
		{"defaults", Settings{Sequencer: seq}, nil},
		{"no sequencer", Settings{}, ErrNoSequencer},
		{"server out of range", Settings{Sequencer: seq, ServerID: 32}, ErrServerID},
		{"worker out of range", Settings{Sequencer: seq, WorkerID: -1}, ErrWorkerID},
		{"bad layout", Settings{Sequencer: seq, Layout: Layout{Epoch: DefaultEpoch, TimeBits: 41}}, ErrBitsSum},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.s)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("New = %v, want %v", err, c.want)
			}
		})
	}
}

func TestGeneratorNumbersIncrease(t *testing.T) {
	g := mustGenerator(t, Settings{ServerID: 3, WorkerID: 7, Sequencer: NewMemorySequencer(nil)})
	ctx := context.Background()
	var drawn []int64
	for i := 0; i < 200; i++ {
		ids, err := g.NextN(ctx, 1+i*37%5000)
		if err != nil {
			t.Fatal(err)
		}
		drawn = append(drawn, ids...)
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		drawn = append(drawn, id)
	}
	requireClean(t, checkNumbers(g.Layout(), 3, 7, [][]int64{drawn}), len(drawn))
	if _, err := g.NextN(ctx, 0); !errors.Is(err, ErrCount) {
		t.Fatalf("NextN(0) = %v", err)
	}
}

// A full millisecond makes the generator sleep to the boundary: it asks
// again about once per millisecond, not thousands of times.
func TestGeneratorOverflowWaitsWithoutSpinning(t *testing.T) {
	cs := &countingSequencer{Sequencer: NewMemorySequencer(nil)}
	g := mustGenerator(t, Settings{Layout: tinyLayout(), ServerID: 1, WorkerID: 2, Sequencer: cs})
	const n = 2000
	drawn := drawConcurrently(t, []*Generator{g}, n, 100)
	a := checkNumbers(g.Layout(), 1, 2, drawn)
	requireClean(t, a, n)
	if a.busiest > 4 {
		t.Fatalf("a millisecond held %d numbers, the layout allows 4", a.busiest)
	}
	// n/4 = 500 full blocks; each is followed by at most a couple of full
	// replies while the boundary approaches. A spinning client would make
	// tens of thousands of calls.
	if blocks := n / 4; cs.full > 3*blocks {
		t.Fatalf("%d full replies for %d blocks: the generator spins", cs.full, blocks)
	}
	st := g.Stats()
	if st.Waits == 0 || st.Numbers != n {
		t.Fatalf("stats = %+v", st)
	}
	t.Logf("%d reservations, %d full replies, %+v", cs.calls, cs.full, st)
}

// steppingClock is the real clock plus an offset a test can move, so a
// clock step back can be simulated while time still passes.
type steppingClock struct{ offset atomic.Int64 }

func (c *steppingClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *steppingClock) step(d time.Duration) {
	c.offset.Add(int64(d))
}

func TestMemoryClockStepBack(t *testing.T) {
	clock := &steppingClock{}
	g := mustGenerator(t, Settings{ServerID: 1, WorkerID: 1, Sequencer: NewMemorySequencer(clock.now)})
	ctx := context.Background()
	before, err := g.NextN(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	clock.step(-80 * time.Millisecond)
	after, err := g.NextN(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	// It waited out the step rather than reuse the milliseconds: the
	// numbers drawn after it increase from the last one before it, with
	// no millisecond over capacity. (How long it waited is the clock's
	// doing: a pause between the draw and the step shortens it.)
	requireClean(t, checkNumbers(g.Layout(), 1, 1, [][]int64{append(before, after...)}), 10000)
	last, _ := g.Layout().Decompose(before[len(before)-1])
	if first, _ := g.Layout().Decompose(after[0]); first.UnixMs < last.UnixMs {
		t.Fatalf("after an 80ms step back it issued in millisecond %d, before the last one used, %d", first.UnixMs, last.UnixMs)
	}
}

func TestGeneratorMaxWaitReportsClockBackwards(t *testing.T) {
	clock := &steppingClock{}
	g := mustGenerator(t, Settings{Sequencer: NewMemorySequencer(clock.now), MaxWait: 100 * time.Millisecond})
	ctx := context.Background()
	if _, err := g.Next(ctx); err != nil {
		t.Fatal(err)
	}
	clock.step(-10 * time.Second)
	if _, err := g.Next(ctx); !errors.Is(err, ErrClockBackwards) {
		t.Fatalf("after a 10s step back: %v, want ErrClockBackwards", err)
	}
}

func TestGeneratorCancelEndsWait(t *testing.T) {
	clock := &steppingClock{}
	g := mustGenerator(t, Settings{Sequencer: NewMemorySequencer(clock.now), MaxWait: time.Minute})
	if _, err := g.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.step(-30 * time.Second) // the next number is 30s away
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	// A wait that ignored the cancel would end 30s on with a number and
	// no error; the bound on this wait is only there to fail before that.
	done := make(chan error, 1)
	go func() { _, err := g.Next(ctx); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the cancel did not end the wait for a clock 30s behind")
	}
}

// fakeSequencer replays fixed blocks, to prove the generator refuses
// reservations that break the Sequencer contract.
type fakeSequencer struct{ blocks []Block }

func (f *fakeSequencer) Reserve(context.Context, Request) (Block, error) {
	b := f.blocks[0]
	f.blocks = f.blocks[1:]
	return b, nil
}

func TestGeneratorRefusesBrokenSequencer(t *testing.T) {
	now := time.Now().UnixMilli()
	cases := []struct {
		name   string
		blocks []Block
		want   error
	}{
		{"repeat", []Block{{UnixMs: now, First: 0, Count: 2}, {UnixMs: now, First: 1, Count: 2}}, ErrNotIncreasing},
		{"too many", []Block{{UnixMs: now, First: 0, Count: 2}, {UnixMs: now + 1, First: 0, Count: 3}}, ErrBadReservation},
		{"past sequence", []Block{{UnixMs: now, First: 0, Count: 2}, {UnixMs: now + 1, First: 4095, Count: 2}}, ErrBadReservation},
		{"before epoch", []Block{{UnixMs: now, First: 0, Count: 2}, {UnixMs: 5, First: 0, Count: 2}}, ErrBeforeEpoch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustGenerator(t, Settings{Sequencer: &fakeSequencer{blocks: c.blocks}})
			if _, err := g.NextN(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
			ids, err := g.NextN(context.Background(), 2)
			if !errors.Is(err, c.want) || ids != nil {
				t.Fatalf("NextN = %v, %v; want nothing and %v", ids, err, c.want)
			}
		})
	}
}

func TestMemoryLayoutChange(t *testing.T) {
	testLayoutChange(t, func(t *testing.T) Sequencer { return NewMemorySequencer(nil) })
}

// testLayoutChange moves one (server, worker) through layout changes and
// checks that numbers keep increasing, and that a change back to a layout
// whose numbers would fall below those issued is refused.
func testLayoutChange(t *testing.T, newSeq func(t *testing.T) Sequencer) {
	seq := newSeq(t)
	ctx := context.Background()
	old := DefaultLayout()
	wider := Layout{Epoch: DefaultEpoch, TimeBits: 40, ServerBits: 5, WorkerBits: 5, SequenceBits: 13}
	regrouped := Layout{Epoch: DefaultEpoch, TimeBits: 40, ServerBits: 4, WorkerBits: 6, SequenceBits: 13}
	var last int64 = -1
	for _, l := range []Layout{old, wider, regrouped} {
		g := mustGenerator(t, Settings{Layout: l, ServerID: 3, WorkerID: 4, Sequencer: seq})
		ids, err := g.NextN(ctx, 10000)
		if err != nil {
			t.Fatalf("layout %s: %v", l, err)
		}
		if ids[0] <= last {
			t.Fatalf("layout %s: first number %d is not above the last one before the change, %d", l, ids[0], last)
		}
		requireClean(t, checkNumbers(l, 3, 4, [][]int64{ids}), 10000)
		last = ids[len(ids)-1]
	}
	// Back to 12 sequence bits: under it, the numbers just issued decode
	// as times decades ahead, so nothing above them could be issued.
	g := mustGenerator(t, Settings{Layout: old, ServerID: 3, WorkerID: 4, Sequencer: seq})
	if _, err := g.Next(ctx); !errors.Is(err, ErrLayoutChange) {
		t.Fatalf("change back: %v, want ErrLayoutChange", err)
	}
	// The refusal changed nothing: the current layout still issues.
	g = mustGenerator(t, Settings{Layout: regrouped, ServerID: 3, WorkerID: 4, Sequencer: seq})
	id, err := g.Next(ctx)
	if err != nil || id <= last {
		t.Fatalf("after a refused change: %d, %v (last %d)", id, err, last)
	}
}

func ExampleGenerator() {
	g, err := New(Settings{ServerID: 1, WorkerID: 2, Sequencer: NewMemorySequencer(nil)})
	if err != nil {
		panic(err)
	}
	ids, _ := g.NextN(context.Background(), 3)
	p, _ := g.Layout().Decompose(ids[0])
	fmt.Println(len(ids), ids[0] < ids[1] && ids[1] < ids[2], p.Server, p.Worker)
	// Output: 3 true 1 2
}
