package idgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/redis/go-redis/v9"
)

func keyStore(t testing.TB, c redis.Cmdable, ttl time.Duration) *KeyStore {
	t.Helper()
	s, err := NewKeyStore(c, fmt.Sprintf("keys-%d", rand.Int64()), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyStoreClaims(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	s := keyStore(t, c, time.Hour)
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	claims := []Claim{
		{Key: []byte("ORD-1"), Source: "in/0/0", Number: 100},
		{Key: []byte("ORD-2"), Source: "in/0/1", Number: 101},
		{Key: []byte("ORD-1"), Source: "in/0/2", Number: 102}, // same batch, later: a repeat
		{Key: []byte(long), Source: "in/0/3", Number: 103},
		{Key: []byte("{tag}"), Source: "in/0/4", Number: 104},
	}
	if err := s.Claims(ctx, claims); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		n      int64
		repeat bool
	}{{100, false}, {101, false}, {100, true}, {103, false}, {104, false}}
	for i, w := range want {
		if claims[i].Number != w.n || claims[i].Repeat != w.repeat {
			t.Errorf("claim %d = %+v, want number %d repeat %v", i, claims[i], w.n, w.repeat)
		}
	}
	// The same record read again (after an aborted transaction) gets its
	// number back and is not a repeat; another record with the key is.
	again := []Claim{
		{Key: []byte("ORD-1"), Source: "in/0/0", Number: 200},
		{Key: []byte("ORD-1"), Source: "replay/3/9", Number: 201},
		{Key: []byte(long), Source: "in/0/3", Number: 202},
	}
	if err := s.Claims(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again[0].Number != 100 || again[0].Repeat || again[1].Number != 100 || !again[1].Repeat || again[2].Number != 103 || again[2].Repeat {
		t.Fatalf("second round: %+v", again)
	}
	ttl, err := c.PTTL(ctx, s.redisKey([]byte("ORD-1"))).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("ttl = %s, %v; want about an hour", ttl, err)
	}
	for _, k := range []string{s.redisKey([]byte(long)), s.redisKey([]byte("{tag}"))} {
		if strings.ContainsAny(k, "{}") || len(k) > 100 {
			t.Errorf("key %q should have been hashed", k)
		}
	}
}

// Two workers claim the same keys at the same moment: for each key one
// number wins, and both get it.
func TestKeyStoreConcurrentClaimsAgree(t *testing.T) {
	r := testenv.RedisServer(t)
	s := keyStore(t, r.Client(t), 0)
	const n = 2000
	results := make([][]Claim, 2)
	var wg sync.WaitGroup
	for w := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			claims := make([]Claim, n)
			for i := range claims {
				claims[i] = Claim{Key: []byte(fmt.Sprintf("ORD-%d", i)), Source: fmt.Sprintf("w%d/0/%d", w, i), Number: int64(w*n + i)}
			}
			if err := s.Claims(context.Background(), claims); err != nil {
				t.Error(err)
			}
			results[w] = claims
		}()
	}
	wg.Wait()
	repeats := 0
	for i := 0; i < n; i++ {
		a, b := results[0][i], results[1][i]
		if a.Number != b.Number {
			t.Fatalf("key %d: worker 0 got %d, worker 1 got %d", i, a.Number, b.Number)
		}
		if a.Repeat == b.Repeat {
			t.Fatalf("key %d: exactly one worker should see a repeat: %+v %+v", i, a, b)
		}
		if a.Repeat {
			repeats++
		}
	}
	t.Logf("%d keys: every one has one number; worker 0 lost %d races", n, repeats)
}

func TestKeyStoreRedisDown(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	s := keyStore(t, c, 0)
	claims := []Claim{{Key: []byte("a"), Source: "x/0/0", Number: 1}}
	if err := s.Claims(context.Background(), claims); err == nil || !strings.Contains(err.Error(), "claim 1 idempotency keys") {
		t.Fatalf("Claims with Redis down = %v", err)
	}
}

// BenchmarkKeyStoreClaims measures one pipelined round trip of 1,024 claims
// (the worker's sub-batch) and reports the Redis memory per key.
func BenchmarkKeyStoreClaims(b *testing.B) {
	r := testenv.RedisServer(b)
	c := r.Client(b)
	s := keyStore(b, c, 0)
	ctx := context.Background()
	claims := make([]Claim, 1024)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for j := range claims {
			claims[j] = Claim{Key: []byte(fmt.Sprintf("ORD-%08d-%04d", i, j)), Source: fmt.Sprintf("orders/%d/%d", j%12, 1_000_000+i*1024+j), Number: 668296124691520267 + int64(j)}
		}
		if err := s.Claims(ctx, claims); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(claims)), "ns/key")
	if used, err := c.MemoryUsage(ctx, s.redisKey(claims[0].Key)).Result(); err == nil {
		b.ReportMetric(float64(used), "redis-bytes/key")
	}
}

// With the number index, a pre-filled number that another key holds is
// Taken when its own key has no number, and its key is not claimed; the
// same number with its own key, a number no key holds yet, and issued
// numbers pass as before, and a key that has a number is claimed as
// without the index (a mismatch shows as the key's number). Without the
// index nothing is Taken.
func TestKeyStoreNumberIndex(t *testing.T) {
	r := testenv.RedisServer(t)
	c := r.Client(t)
	ctx := context.Background()
	s := keyStore(t, c, time.Hour)
	s.IndexNumbers()
	issued := []Claim{
		{Key: []byte("ORD-A"), Source: "in/0/0", Number: 500},
		{Key: []byte("ORD-B"), Source: "in/0/1", Number: 501},
	}
	if err := s.Claims(ctx, issued); err != nil {
		t.Fatal(err)
	}
	claims := []Claim{
		{Key: []byte("ORD-C"), Source: "in/0/2", Number: 500, Prefilled: true}, // ORD-A's number, a new key
		{Key: []byte("ORD-A"), Source: "in/0/3", Number: 500, Prefilled: true}, // its own number again
		{Key: []byte("ORD-D"), Source: "in/0/4", Number: 777, Prefilled: true}, // a number no key holds
		{Key: []byte("ORD-E"), Source: "in/0/5", Number: 777, Prefilled: true}, // now ORD-D's
		{Key: []byte("ORD-F"), Source: "in/0/6", Number: 502},                  // issued
		{Key: []byte("ORD-B"), Source: "in/0/7", Number: 500, Prefilled: true}, // ORD-A's, but ORD-B has one: a mismatch
	}
	if err := s.Claims(ctx, claims); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		n             int64
		taken, repeat bool
	}{{500, true, false}, {500, false, true}, {777, false, false}, {777, true, false}, {502, false, false}, {501, false, true}}
	for i, w := range want {
		if c := claims[i]; c.Number != w.n || c.Taken != w.taken || c.Repeat != w.repeat {
			t.Errorf("claim %d (%s) = %+v, want number %d taken %v repeat %v", i, c.Key, c, w.n, w.taken, w.repeat)
		}
	}
	// A taken claim left its key unclaimed: ORD-C can still get a number.
	if n, err := c.Exists(ctx, s.redisKey([]byte("ORD-C")), s.redisKey([]byte("ORD-E"))).Result(); err != nil || n != 0 {
		t.Fatalf("keys of taken claims exist: %d, %v", n, err)
	}
	if ttl, err := c.PTTL(ctx, s.numKey(500)).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("the index's ttl = %s, %v; want about an hour", ttl, err)
	}

	off := keyStore(t, c, time.Hour)
	if err := off.Claims(ctx, []Claim{{Key: []byte("ORD-A"), Source: "x/0/0", Number: 1}}); err != nil {
		t.Fatal(err)
	}
	other := []Claim{{Key: []byte("ORD-C"), Source: "x/0/1", Number: 1, Prefilled: true}}
	if err := off.Claims(ctx, other); err != nil {
		t.Fatal(err)
	}
	if other[0].Taken || other[0].Number != 1 {
		t.Fatalf("without the index: %+v, want number 1, not taken", other[0])
	}
}
