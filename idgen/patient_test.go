package idgen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// flakySequencer fails the first fails calls with err, then reserves.
type flakySequencer struct {
	fails int
	err   error
	calls int
}

func (f *flakySequencer) Reserve(ctx context.Context, req Request) (Block, error) {
	f.calls++
	if f.calls <= f.fails {
		return Block{UnixMs: 1, Count: 1}, f.err // a block with an error must never be used
	}
	return Block{UnixMs: time.Now().UnixMilli(), First: 0, Count: min(req.N, 10)}, nil
}

func TestPatient(t *testing.T) {
	outage := errors.New("dial tcp: connection refused")
	t.Run("rides through an outage", func(t *testing.T) {
		f := &flakySequencer{fails: 3, err: outage}
		var retries int
		p := Patient(f, time.Second, func(error, time.Duration) { retries++ })
		b, err := p.Reserve(context.Background(), Request{N: 5})
		if err != nil || b.Count != 5 || retries != 3 {
			t.Fatalf("block %+v, err %v, retries %d; want 5 numbers after 3 retries", b, err, retries)
		}
	})
	t.Run("gives up after the bound", func(t *testing.T) {
		// The clock moves only by each retry's wait, so that the give-up
		// does not depend on how busy the machine is: waits of 10, 20, 40
		// and 80ms take it to 150ms, and the next (160ms) would pass 200.
		f := &flakySequencer{fails: 1 << 30, err: outage}
		clock := time.Unix(1000, 0)
		p := Patient(f, 200*time.Millisecond, func(_ error, wait time.Duration) { clock = clock.Add(wait) }).(*patient)
		p.now = func() time.Time { return clock }
		_, err := p.Reserve(context.Background(), Request{N: 5})
		if !errors.Is(err, outage) || !strings.Contains(err.Error(), "no reservation for 150ms, giving up") || f.calls != 5 {
			t.Fatalf("err %v after %d calls, want the outage given up after 5 calls and 150ms", err, f.calls)
		}
	})
	t.Run("does not retry a configuration error", func(t *testing.T) {
		f := &flakySequencer{fails: 1 << 30, err: ErrUnknownMaster}
		_, err := Patient(f, time.Minute, nil).Reserve(context.Background(), Request{N: 5})
		if !errors.Is(err, ErrUnknownMaster) || f.calls != 1 {
			t.Fatalf("err %v after %d calls, want ErrUnknownMaster after 1", err, f.calls)
		}
	})
	t.Run("a generator never uses a failed reply", func(t *testing.T) {
		f := &flakySequencer{fails: 2, err: ErrNotReplicated}
		g := mustGenerator(t, Settings{Sequencer: Patient(f, time.Second, nil)})
		ids, err := g.NextN(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := DefaultLayout().Decompose(ids[0])
		if p.UnixMs == 1 {
			t.Fatalf("the generator used the block of a failed reservation")
		}
	})
}
