package idgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/redis/go-redis/v9"
)

// redisSequencer returns a sequencer on the test's Redis with a prefix of
// its own, so tests sharing one Redis never see each other's state.
func redisSequencer(t testing.TB, c redis.Scripter) *RedisSequencer {
	t.Helper()
	s, err := NewRedisSequencer(RedisSettings{Client: c, Prefix: fmt.Sprintf("test-%s-%d", t.Name(), rand.Int64())})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Eight goroutines over two clients share one (server, worker) and draw a
// million numbers: all unique, none spilling out of its fields, no
// millisecond over capacity, each goroutine's numbers increasing.
func TestRedisConcurrentUnique(t *testing.T) {
	r := testenv.RedisServer(t)
	clients := []*redis.Client{r.Client(t), r.Client(t)}
	prefix := redisSequencer(t, clients[0]).prefix
	var gens []*Generator
	for i := 0; i < 8; i++ {
		s, _ := NewRedisSequencer(RedisSettings{Client: clients[i%2], Prefix: strings.Trim(prefix, "{}")})
		gens = append(gens, mustGenerator(t, Settings{ServerID: 5, WorkerID: 9, Sequencer: s}))
	}
	const perGen = 125000
	drawn := drawConcurrently(t, gens, perGen, 1000)
	a := checkNumbers(DefaultLayout(), 5, 9, drawn)
	requireClean(t, a, 8*perGen)
}

// The sequencer reads Redis TIME, not the client's clock, so client skew
// does not enter; what remains is a pause between a client deciding to ask
// and Redis answering. Clients paused at random, and clients whose own
// clocks disagree by ±50ms (which this design never reads), still get
// unique numbers. TestOriginFlawsAreCaught runs the origin's algorithm under
// the same conditions and finds duplicates.
func TestRedisSkewAndPauses(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	base := redisSequencer(t, c)
	var gens []*Generator
	for i := 0; i < 8; i++ {
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		s := pausingSequencer{Sequencer: base, pause: func() time.Duration {
			return time.Duration(rng.IntN(3000)) * time.Microsecond
		}}
		gens = append(gens, mustGenerator(t, Settings{ServerID: 1, WorkerID: 1, Sequencer: s}))
	}
	drawn := drawConcurrently(t, gens, 5000, 50)
	requireClean(t, checkNumbers(DefaultLayout(), 1, 1, drawn), 8*5000)
}

// A clock that steps back: the numbers last issued belong to a millisecond
// the clock has not reached again. The state says the pair issued up to
// sequence 5 of a millisecond 300ms ahead of Redis's clock, as if the clock
// had been 300ms fast and was then corrected. The sequencer must issue
// nothing at or below that.
func TestRedisClockStepBack(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	s := redisSequencer(t, c)
	g := mustGenerator(t, Settings{ServerID: 2, WorkerID: 3, Sequencer: s})
	ctx := context.Background()
	before, err := g.NextN(ctx, 3000)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := tm.UnixMilli() + 300
	if err := c.HSet(ctx, s.Key(2, 3), "ms", ahead, "seq", 5).Err(); err != nil {
		t.Fatal(err)
	}
	floor, _ := DefaultLayout().Compose(ahead, 2, 3, 5)
	g2 := mustGenerator(t, Settings{ServerID: 2, WorkerID: 3, Sequencer: s})
	after, err := g2.NextN(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if after[0] <= floor {
		t.Fatalf("after the step back it issued %d, at or below the last issued %d", after[0], floor)
	}
	requireClean(t, checkNumbers(DefaultLayout(), 2, 3, [][]int64{before, after}), 13000)
}

// Two sequence bits: four numbers a millisecond, so every millisecond fills
// and the generators wait. No duplicates, and never more than four numbers
// in a millisecond.
func TestRedisOverflow(t *testing.T) {
	r := testenv.RedisServer(t)
	cs := &countingSequencer{Sequencer: redisSequencer(t, r.Client(t))}
	var gens []*Generator
	for i := 0; i < 4; i++ {
		gens = append(gens, mustGenerator(t, Settings{Layout: tinyLayout(), ServerID: 7, WorkerID: 7, Sequencer: cs}))
	}
	drawn := drawConcurrently(t, gens, 500, 10)
	a := checkNumbers(tinyLayout(), 7, 7, drawn)
	requireClean(t, a, 2000)
	if a.busiest > 4 {
		t.Fatalf("a millisecond held %d numbers, the layout allows 4", a.busiest)
	}
	var waits uint64
	for _, g := range gens {
		waits += g.Stats().Waits
	}
	if waits == 0 {
		t.Fatal("no generator waited, so the test did not overflow")
	}
	t.Logf("%d reservations, %d full replies", cs.calls, cs.full)
}

// A new process (a new client and generator), and Redis itself restarted,
// carry on above the last number issued.
func TestRedisRestart(t *testing.T) {
	r := testenv.RedisServer(t)
	prefix := strings.Trim(redisSequencer(t, r.Client(t)).prefix, "{}")
	draw := func() []int64 {
		c := r.Client(t)
		s, _ := NewRedisSequencer(RedisSettings{Client: c, Prefix: prefix})
		ids, err := mustGenerator(t, Settings{ServerID: 1, WorkerID: 0, Sequencer: s}).NextN(context.Background(), 5000)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	a := draw()
	b := draw()
	if b[0] <= a[len(a)-1] {
		t.Fatalf("a new process issued %d after %d", b[0], a[len(a)-1])
	}
	if !r.CanRestart() {
		t.Skipf("cannot restart a %s Redis; the new-process half passed", r.Kind)
	}
	r.Stop(t)
	r.Start(t)
	c := draw()
	if c[0] <= b[len(b)-1] {
		t.Fatalf("after a Redis restart it issued %d after %d", c[0], b[len(b)-1])
	}
}

func TestRedisLayoutChange(t *testing.T) {
	r := testenv.RedisServer(t)
	testLayoutChange(t, func(t *testing.T) Sequencer { return redisSequencer(t, r.Client(t)) })
}

func TestRedisErrorsAreReturnedNotNumbers(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	s := redisSequencer(t, c)
	g := mustGenerator(t, Settings{Sequencer: s})
	ids, err := g.NextN(context.Background(), 10)
	if err == nil || ids != nil {
		t.Fatalf("with Redis down: %v, %v", ids, err)
	}
	if !strings.Contains(err.Error(), "reserve sequence for server 0 worker 0") || !strings.Contains(err.Error(), "redis sequencer script") {
		t.Fatalf("error lacks context: %v", err)
	}
}

// After SCRIPT FLUSH (as after a failover) EVALSHA fails with NOSCRIPT and
// the sequencer falls back to EVAL.
func TestRedisScriptFlushFallsBackToEval(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	g := mustGenerator(t, Settings{Sequencer: redisSequencer(t, c)})
	ctx := context.Background()
	a, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := g.Next(ctx)
	if err != nil || b <= a {
		t.Fatalf("after SCRIPT FLUSH: %d, %v (before %d)", b, err, a)
	}
}

func TestRedisKeysShareOneHashTag(t *testing.T) {
	s, _ := NewRedisSequencer(RedisSettings{Client: redis.NewClient(&redis.Options{}), Prefix: "shop"})
	for _, k := range []string{s.Key(0, 0), s.Key(31, 31), s.layoutKey} {
		if !strings.HasPrefix(k, "{shop}:") {
			t.Fatalf("key %q is outside the {shop} hash tag", k)
		}
	}
}

// Every form of Redis URL is accepted and shown with its passwords
// redacted; RedisClient takes the one-node forms.
func TestRedisURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"redis://:secret@127.0.0.1:6380/2", "redis://:xxxxx@127.0.0.1:6380/2"},
		{"rediss://user:pw@example.com:6380/0", "rediss://user:xxxxx@example.com:6380/0"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"rediss+cluster://u:secret@h1:1,h2:2?dial_timeout=1s", "rediss+cluster://u:xxxxx@h1:1,h2:2?dial_timeout=1s"},
		{"redis+sentinel://u:secret@s1:1,s2:2/m?db=1&sentinel_password=secret2", "redis+sentinel://u:xxxxx@s1:1,s2:2/m?db=1&sentinel_password=xxxxx"},
	} {
		if got := RedactURL(c.url); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.url, got, c.want)
		}
		if _, _, err := NewRedisClient(c.url); err != nil {
			t.Errorf("NewRedisClient(%q): %v", c.url, err)
		}
	}
	if _, _, err := NewRedisClient("http://x"); err == nil {
		t.Error("NewRedisClient accepted http://")
	}
}

func TestRedisCancelledContext(t *testing.T) {
	r := testenv.RedisServer(t)
	g := mustGenerator(t, Settings{Sequencer: redisSequencer(t, r.Client(t))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// BenchmarkRedisNumbers compares one round trip per number, as the origin
// does, with one round trip per block of 4,096 numbers. The layout's limit
// is 4,096,000 numbers a second.
func BenchmarkRedisNumbers(b *testing.B) {
	r := testenv.RedisServer(b)
	for _, block := range []int{1, 4096} {
		b.Run(fmt.Sprintf("block=%d", block), func(b *testing.B) {
			g := mustGenerator(b, Settings{Sequencer: redisSequencer(b, r.Client(b))})
			ctx := context.Background()
			buf := make([]int64, 0, block)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = g.AppendN(ctx, buf[:0], block); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*block)/b.Elapsed().Seconds(), "numbers/s")
		})
	}
}
