package faults_test

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// e. The Redis primary that holds the sequencer's key is killed with
// SIGKILL while the stream flows: on a Redis Cluster of 3 masters and 3
// replicas (node timeout 1s), and under Sentinel (a primary, 2 replicas, 3
// sentinels, down-after 1s). The worker runs with the default
// --redis-wait-replicas (1 on both), aborts what it cannot number, and
// resumes once the promoted replica answers.
func TestFaultRedisFailover(t *testing.T) {
	t.Run("cluster", func(t *testing.T) { testRedisFailover(t, "cluster") })
	t.Run("sentinel", func(t *testing.T) { testRedisFailover(t, "sentinel") })
}

func testRedisFailover(t *testing.T, topo string) {
	k := testenv.Kafka(t)
	if topo == "cluster" {
		cl := testenv.NewRedisCluster(t)
		e := harness.NewEnv(t, k, &testenv.Redis{URL: cl.URL, Kind: "cluster"}, 4)
		runFailover(t, e, "Redis Cluster: SIGKILL the sequencer's master", func() string {
			m := cl.MasterOf(t, "{"+e.Input+"}:seq:1:1")
			m.Kill()
			return m.Addr
		})
		return
	}
	s := testenv.NewRedisSentinels(t)
	e := harness.NewEnv(t, k, &testenv.Redis{URL: s.URL, Kind: "sentinel"}, 4)
	runFailover(t, e, "Sentinel: SIGKILL the primary", func() string {
		p := s.Primary()
		if p == nil {
			t.Fatal("no primary to kill")
		}
		p.Kill()
		return p.Addr
	})
}

func runFailover(t *testing.T, e *harness.Env, fault string, kill func() string) {
	harness.Binary(t)
	n := scaled(e, 150000)
	rate := streamRate(e)
	r := begin(t, e, fault, "1 worker, 4 partitions", "--max-poll-records", "5000")
	r.p.start("a")
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	r.sleepUntil(r.spread(1, flow/4, flow/2)[0])
	r.m.Instant("SIGKILL the Redis primary")
	addr := kill()
	t.Logf("killed the primary %s at %s", addr, fmtDur(time.Since(r.start)))
	r.finish(flow + 2*time.Minute)
}
