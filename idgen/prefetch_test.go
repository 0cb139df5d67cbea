package idgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter is a Numberer handing out 0, 1, 2, ... and failing while broken.
type counter struct {
	next   atomic.Int64
	broken atomic.Bool
}

var errBroken = errors.New("broken")

func (c *counter) AppendN(_ context.Context, dst []int64, n int) ([]int64, error) {
	if c.broken.Load() {
		return dst, errBroken
	}
	for i := 0; i < n; i++ {
		dst = append(dst, c.next.Add(1)-1)
	}
	return dst, nil
}

// Numbers taken from a prefetcher, by one caller or several, strictly
// increase in the order each caller takes them, and none is handed out twice.
func TestPrefetcherKeepsOrder(t *testing.T) {
	g, err := New(Settings{Sequencer: NewMemorySequencer(nil)})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPrefetcher(g, 20000, 4096, time.Second)
	defer p.Close()
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(-1)
			for i := 0; i < 200; i++ {
				ids, err := p.AppendN(ctx, nil, 1+i%700)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					if id <= last || seen[id] {
						t.Errorf("%d after %d (seen: %v)", id, last, seen[id])
					}
					seen[id], last = true, id
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// A block older than the maximum age is thrown away, so a number is never
// much older than the moment it is used.
func TestPrefetcherDropsStaleBlocks(t *testing.T) {
	c := &counter{}
	clock := time.Now()
	var mu sync.Mutex
	p := newPrefetcher(c, 10, 10, time.Minute, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	defer p.Close()
	ctx := context.Background()
	first, err := p.AppendN(ctx, nil, 3)
	if err != nil || first[0] != 0 {
		t.Fatalf("first = %v, %v", first, err)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	next, err := p.AppendN(ctx, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The rest of the first block (3..9) and whatever was queued with the
	// old time are gaps now.
	if next[0] < 10 {
		t.Fatalf("got %d from a block older than the maximum age", next[0])
	}
}

// A failing source surfaces as an error from AppendN, and the prefetcher
// recovers when the source does.
func TestPrefetcherErrorsAndRecovers(t *testing.T) {
	c := &counter{}
	c.broken.Store(true)
	p := NewPrefetcher(c, 10, 10, time.Minute)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.AppendN(ctx, nil, 5); !errors.Is(err, errBroken) {
		t.Fatalf("AppendN = %v, want the source's error", err)
	}
	c.broken.Store(false)
	for {
		ids, err := p.AppendN(ctx, nil, 5)
		if err == nil {
			if len(ids) != 5 {
				t.Fatalf("got %v", ids)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("never recovered: %v", err)
		}
	}
}

// After Forget (a worker assigned partitions) no number reserved before it
// is handed out: the next one is above every number reserved so far, so it
// is also above any the partitions' previous owner issued.
func TestPrefetcherForget(t *testing.T) {
	c := &counter{}
	p := NewPrefetcher(c, 100, 10, time.Minute)
	defer p.Close()
	ctx := context.Background()
	if _, err := p.AppendN(ctx, nil, 5); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the queue fill
	p.Forget()
	reserved := c.next.Load()
	ids, err := p.AppendN(ctx, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] < reserved {
		t.Fatalf("after Forget got %d, reserved before it: below %d", ids[0], reserved)
	}
}
