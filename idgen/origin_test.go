package idgen

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/redis/go-redis/v9"
)

// originScript is the origin article's Lua: INCR a key named after the
// number's prefix, starting at 1, and PEXPIRE it after 1 ms. It exists only
// here, to show that the tests catch the flaws it has.
var originScript = redis.NewScript(`
local n = redis.call("incr", KEYS[1])
redis.call("pexpire", KEYS[1], 1)
return n`)

// originNumber is the origin's getNumber: the client's clock, one round trip
// per number, accept the sequence unless it is > 2^bits (so 2^bits itself
// spills into the worker field), otherwise sleep 1 ms and retry.
func originNumber(ctx context.Context, c redis.Scripter, prefix string, now func() time.Time, l Layout, server, worker int64) (int64, error) {
	for {
		elapsed := now().UnixMilli() - l.EpochMs()
		id := l.compose(elapsed, server, worker, 0)
		seq, err := originScript.Run(ctx, c, []string{prefix + strconv.FormatInt(id, 10)}).Int64()
		if err != nil {
			return 0, err
		}
		if seq > l.PerMillisecond() {
			time.Sleep(time.Millisecond)
			continue
		}
		return id | seq, nil
	}
}

// originDraw runs one goroutine per clock skew, each drawing n numbers the
// origin's way, and returns what each drew.
func originDraw(t *testing.T, c redis.Scripter, l Layout, skews []time.Duration, pause time.Duration, n int) [][]int64 {
	t.Helper()
	ctx := context.Background()
	prefix := "origin-" + strconv.FormatInt(rand.Int64(), 10) + ":"
	out := make([][]int64, len(skews))
	var wg sync.WaitGroup
	for i, skew := range skews {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := func() time.Time {
				ts := time.Now().Add(skew)
				if pause > 0 {
					// The pause falls between reading the clock and Redis.
					time.Sleep(time.Duration(rand.Int64N(int64(pause))))
				}
				return ts
			}
			for j := 0; j < n; j++ {
				id, err := originNumber(ctx, c, prefix, now, l, 1, 2)
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = append(out[i], id)
			}
		}()
	}
	wg.Wait()
	return out
}

// The same checks that pass for the sequencer catch the origin's flaws: its
// expiring counters reissue numbers when clocks disagree or a client pauses,
// and its off-by-one check lets sequence 2^bits spill into the worker field.
func TestOriginFlawsAreCaught(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	t.Run("skew", func(t *testing.T) {
		skews := []time.Duration{-50 * time.Millisecond, -25 * time.Millisecond, 0, 0, 10 * time.Millisecond, 25 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond}
		a := checkNumbers(DefaultLayout(), 1, 2, originDraw(t, c, DefaultLayout(), skews, 0, 3000))
		t.Logf("origin with clocks ±50ms apart: %+v", a)
		if a.duplicates == 0 {
			t.Fatalf("the checks found no duplicates in the origin's numbers: %+v", a)
		}
	})
	t.Run("pauses", func(t *testing.T) {
		skews := make([]time.Duration, 8)
		a := checkNumbers(DefaultLayout(), 1, 2, originDraw(t, c, DefaultLayout(), skews, 3*time.Millisecond, 500))
		t.Logf("origin with pauses before Redis: %+v", a)
		if a.duplicates == 0 {
			t.Fatalf("the checks found no duplicates in the origin's numbers: %+v", a)
		}
	})
	t.Run("overflow", func(t *testing.T) {
		skews := make([]time.Duration, 4)
		a := checkNumbers(tinyLayout(), 1, 2, originDraw(t, c, tinyLayout(), skews, 0, 1000))
		t.Logf("origin with 2 sequence bits: %+v", a)
		if a.spilled == 0 {
			t.Fatalf("the checks found no sequence spilling into the worker field: %+v", a)
		}
	})
}
