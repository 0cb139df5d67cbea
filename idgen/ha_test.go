package idgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/redis/go-redis/v9"
)

// haClient returns a client for url, closed when the test ends.
func haClient(t testing.TB, url string) (redis.UniversalClient, RedisInfo) {
	t.Helper()
	c, info, err := NewRedisClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, info
}

// Eight generators sharing one (server, worker) on each topology, with
// WAIT 1: every number unique, each generator's increasing, and the
// reservations really waited (the primary has replicas, none failed).
func TestHASequencer(t *testing.T) {
	for _, topo := range []string{"cluster", "sentinel"} {
		t.Run(topo, func(t *testing.T) {
			url := haURL(t, topo)
			c, info := haClient(t, url)
			if info.Kind != topo || info.DefaultWaitReplicas() != 1 {
				t.Fatalf("info %+v", info)
			}
			prefix := fmt.Sprintf("ha-%s-%d", topo, rand.Int64())
			var gens []*Generator
			var seqs []*RedisSequencer
			for range 8 {
				// 2 s, not the default 100ms: a replica on a starved
				// machine acknowledges late (1 s was missed under two CPU
				// hogs). It stays under the client's 3 s read timeout.
				s, err := NewRedisSequencer(RedisSettings{Client: c, Prefix: prefix, Durability: Durability{Replicas: 1, Timeout: 2 * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, s)
				gens = append(gens, mustGenerator(t, Settings{ServerID: 3, WorkerID: 4, Sequencer: s}))
			}
			drawn := drawConcurrently(t, gens, 50000, 500)
			requireClean(t, checkNumbers(DefaultLayout(), 3, 4, drawn), 8*50000)
			for _, s := range seqs {
				if n := s.NotReplicated(); n != 0 {
					t.Fatalf("%d reservations not replicated on a healthy %s", n, topo)
				}
			}
		})
	}
}

func haURL(t testing.TB, topo string) string {
	t.Helper()
	if topo == "cluster" {
		return testenv.NewRedisCluster(t).URL
	}
	return testenv.NewRedisSentinels(t).URL
}

// Claims over a thousand keys spread over every master of the Cluster, in
// one pipeline per master each followed by WAIT; claimed again, every key
// keeps its first number.
func TestHAKeyStoreOnCluster(t *testing.T) {
	cl := testenv.NewRedisCluster(t)
	c, _ := haClient(t, cl.URL)
	ks, err := NewKeyStore(c, fmt.Sprintf("ks-%d", rand.Int64()), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Durable(Durability{Replicas: 1, Timeout: 2 * time.Second}); err != nil { // as in TestHASequencer
		t.Fatal(err)
	}
	ctx := context.Background()
	claims := make([]Claim, 1000)
	for i := range claims {
		claims[i] = Claim{Key: fmt.Appendf(nil, "order-%d", i), Source: "a", Number: int64(1000 + i)}
	}
	if err := ks.Claims(ctx, claims); err != nil {
		t.Fatal(err)
	}
	masters := map[string]int{}
	for i := range claims {
		masters[cl.MasterOf(t, ks.redisKey(claims[i].Key)).Addr]++
		if claims[i].Repeat || claims[i].Number != int64(1000+i) {
			t.Fatalf("first claim %d: %+v", i, claims[i])
		}
	}
	if len(masters) != 3 {
		t.Fatalf("keys on %d masters, want all 3: %v", len(masters), masters)
	}
	again := make([]Claim, len(claims))
	for i := range again {
		again[i] = Claim{Key: claims[i].Key, Source: "b", Number: 5}
	}
	if err := ks.Claims(ctx, again); err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if !again[i].Repeat || again[i].Number != int64(1000+i) {
			t.Fatalf("second claim %d: %+v", i, again[i])
		}
	}
	if ks.NotReplicated() != 0 {
		t.Fatalf("%d claim round trips not replicated", ks.NotReplicated())
	}
}

// Every bad URL, wrong master name and non-cluster seed is one line that
// says what is wrong, and never shows a password.
func TestHABadRedis(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://x:1", `scheme "http"`},
		{"127.0.0.1:6379", "want redis://"},
		{"redis+cluster://:pw@127.0.0.1:7000,127.0.0.1", `host "127.0.0.1": want host:port`},
		{"redis+cluster://127.0.0.1:7000/3", "a cluster has no database"},
		{"redis+cluster://:pw@127.0.0.1:7000?bogus=1", "unexpected option: bogus"},
		{"redis+sentinel://:pw@127.0.0.1:26379", "want the master name as the path"},
		{"redis+sentinel://127.0.0.1:26379/m?master_name=x", `option "master_name" is not taken here`},
		{"redis+sentinel://127.0.0.1:26379/m?sentinel_password=pw&db=x", "invalid database number"},
		{"redis://:pw@a:1,b:2", "for a cluster use redis+cluster://"},
		{"redis://:pw@127.0.0.1:99999", "port from 1 to 65535"},
	} {
		_, _, err := NewRedisClient(c.url)
		if err == nil {
			t.Errorf("%s: no error", c.url)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrRedisURL) || !strings.Contains(msg, c.want) || strings.Contains(msg, "pw") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line with %q, no password", c.url, msg, c.want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	single := testenv.RedisServer(t)
	c, _ := haClient(t, "redis+cluster://"+single.Addr)
	seq, err := NewRedisSequencer(RedisSettings{Client: c, Durability: Durability{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = seq.Reserve(ctx, Request{Layout: DefaultLayout(), N: 1})
	if !errors.Is(err, ErrNotClusterNode) || strings.Contains(err.Error(), "\n") {
		t.Errorf("cluster seed that is no cluster node: %v", err)
	}
	if !Permanent(err) {
		t.Errorf("not a cluster node is not a permanent error: %v", err)
	}

	s := testenv.NewRedisSentinels(t)
	wrong := strings.TrimSuffix(s.URL, s.Master) + "nosuchmaster"
	c, _ = haClient(t, wrong)
	seq, err = NewRedisSequencer(RedisSettings{Client: c, Durability: Durability{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = seq.Reserve(ctx, Request{Layout: DefaultLayout(), N: 1})
	if !errors.Is(err, ErrUnknownMaster) || !strings.Contains(err.Error(), "nosuchmaster") || strings.Contains(err.Error(), "\n") {
		t.Errorf("wrong master name: %v", err)
	}
	if !Permanent(err) {
		t.Errorf("wrong master name is not a permanent error: %v", err)
	}
}

// BenchmarkWaitCost measures what WAIT 1 costs batches of 1,000 numbers
// on each topology, in 10 interleaved pairs of 300ms windows (wait=0, then
// wait=1) against one setup: the numbers a second of each, the median of
// the pairwise ratios, and the round trips per batch (one pipeline per
// reservation either way). A batch whose WAIT times out is dropped and
// asked again, as gen and the worker do, and counted.
func BenchmarkWaitCost(b *testing.B) {
	for _, topo := range []string{"cluster", "sentinel"} {
		b.Run(topo, func(b *testing.B) {
			c, _ := haClient(b, haURL(b, topo))
			ctx := context.Background()
			var gens [2]*Generator
			var seqs [2]*RedisSequencer
			for wait := range 2 {
				s, err := NewRedisSequencer(RedisSettings{Client: c, Prefix: fmt.Sprintf("bench-%d", rand.Int64()), Durability: Durability{Replicas: wait}})
				if err != nil {
					b.Fatal(err)
				}
				seqs[wait], gens[wait] = s, mustGenerator(b, Settings{Sequencer: s})
			}
			buf := make([]int64, 0, 1000)
			var rates [2][]float64
			var ratios []float64
			var batches [2]int
			b.ReportAllocs()
			for range b.N {
				for range 10 {
					for wait := range 2 {
						n, start := 0, time.Now()
						for time.Since(start) < 300*time.Millisecond {
							var err error
							if buf, err = gens[wait].AppendN(ctx, buf[:0], 1000); errors.Is(err, ErrNotReplicated) {
								continue
							} else if err != nil {
								b.Fatal(err)
							}
							n++
						}
						batches[wait] += n
						rates[wait] = append(rates[wait], float64(n*1000)/time.Since(start).Seconds())
					}
					ratios = append(ratios, rates[1][len(rates[1])-1]/rates[0][len(rates[0])-1])
				}
			}
			b.ReportMetric(median(rates[0]), "numbers/s(wait=0)")
			b.ReportMetric(median(rates[1]), "numbers/s(wait=1)")
			b.ReportMetric(median(ratios), "ratio(wait1/wait0)")
			b.ReportMetric(float64(gens[1].Stats().Reservations)/float64(batches[1]), "roundtrips/batch(wait=1)")
			b.ReportMetric(float64(seqs[1].NotReplicated()), "not_replicated")
		})
	}
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}
