package faults_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// The fault suite on a replicated cluster: three Apache Kafka nodes from
// scripts/kafka-local (KRaft, each broker and controller), every topic with
// replication factor 3 and min.insync.replicas 2, as Kafka's own
// exactly-once test runs (tests/kafkatest/tests/core/transactions_test.py).
// One node at a time is killed or stopped, the one that matters to the
// worker: its transaction coordinator, its group coordinator, a partition
// leader. Every run is accounted for exactly, like the single-broker faults.
//
// These tests run with FLAKESTREAM_KAFKA_LOCAL=1 (which fetches the jars
// if need be; make test-kafka-cluster), never on kfake.

const clusterNodes = 3

// clusterWorker is the one worker's instance name in the cluster faults.
const clusterWorker = "a"

// newClusterEnv starts a 3-node cluster of t's own (opts: see
// testenv.RealKafkaCluster) and creates the topics (replication factor 3) on
// it.
func newClusterEnv(t *testing.T, partitions int32, opts ...testenv.KafkaOpt) *harness.Env {
	t.Helper()
	// Three JVMs per test: only where real brokers are asked for (make
	// test-kafka), never in the kfake suite of make test.
	if os.Getenv("FLAKESTREAM_KAFKA_LOCAL") != "1" {
		t.Skip("the cluster faults run with FLAKESTREAM_KAFKA_LOCAL=1 (make test-kafka-cluster)")
	}
	k := testenv.RealKafkaCluster(t, clusterNodes, opts...)
	e := harness.NewEnv(t, k, testenv.RedisServer(t), partitions)
	harness.Binary(t)
	t.Logf("kafka: %d-node cluster at %v; redis: %s at %s; topics %s{,.out,.dlq} with %d partitions, RF 3",
		clusterNodes, k.Addrs, e.Redis.Kind, e.Redis.Addr, e.Input, partitions)
	return e
}

// clusterTxnID is the worker's transactional ID, given explicitly so that
// the test can ask which node coordinates it.
func clusterTxnID(e *harness.Env) string { return "flakestream-" + e.Group + "-" + clusterWorker }

// clusterBegin starts a run on a 3-node cluster of t's own (4 partitions)
// with the one worker, writing orders (scaled) at rate, and returns the
// environment, the run and how long the writing takes.
func clusterBegin(t *testing.T, orders, rate int, fault, setup string, opts ...testenv.KafkaOpt) (*harness.Env, *run, time.Duration) {
	t.Helper()
	e := newClusterEnv(t, 4, opts...)
	n := scaled(e, orders)
	args := []string{"--max-poll-records", "5000", "--session-timeout", "10s", "--transactional-id", clusterTxnID(e)}
	r := begin(t, e, fault, "3 nodes, RF 3, min ISR 2; 1 worker, 4 partitions; "+setup, args...)
	r.p.start(clusterWorker)
	return e, r, r.clusterStream(n, rate)
}

// clusterStream writes n orders at rate, with bad and numbered ones mixed
// in, and returns how long the writing takes.
func (r *run) clusterStream(n, rate int) time.Duration {
	r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// killOnce kills, at a random moment between a quarter and half of flow,
// the node that node names then (what it is to the worker), and starts it
// again 10 to 20 s later.
func (r *run) killOnce(flow time.Duration, what string, node func() int) {
	r.sleepUntil(r.spread(1, flow/4, flow/2)[0])
	r.bounce(node(), what, true, r.down())
}

// down returns 10 to 20 s, how long a killed node stays down.
func (r *run) down() time.Duration {
	return 10*time.Second + time.Duration(r.rng.Float64()*float64(10*time.Second))
}

// bounce kills (or stops) node n, keeps it down for d, and starts it again.
// It first waits for every replica to be in sync, so that one node at a
// time is out, as in Kafka's own test. The fault on the timeline is the
// kill itself: on a cluster the worker is meant to recover while the node
// is still down (the other nodes take over its leaderships), so its time to
// recover counts from the kill, not from the restart.
func (r *run) bounce(n int, what string, kill bool, d time.Duration) {
	t := r.t
	t.Helper()
	k := r.e.Kafka
	k.WaitInSync(t, 3*time.Minute)
	how := "SIGTERM"
	if kill {
		how = "SIGKILL"
	}
	f := r.m.Instant(fmt.Sprintf("%s node %d (%s), %s down", how, n, what, fmtDur(d)))
	if kill {
		k.KillNode(t, n)
	} else {
		k.StopNode(t, n)
	}
	time.Sleep(d)
	k.StartNode(t, n)
	t.Logf("%s node %d (%s) at %s for %s; back after %s (%d orders written)", how, n, what,
		fmtDur(f.At.Sub(r.start)), fmtDur(d), fmtDur(time.Since(f.At)), r.s.Acked())
}

// a. SIGKILL of the node that coordinates the worker's transactional ID,
// restarted 10 to 20 s later, three times during 500,000 orders. The
// transaction coordinator moves to another node (the transaction-state
// partition's new leader), which must complete or abort what the dead one
// had open. Kafka's own console consumer reads the output and DLQ again.
func TestClusterFaultTxnCoordinator(t *testing.T) {
	e, r, flow := clusterBegin(t, 500000, 5000, "cluster: SIGKILL txn coordinator x3, restart after 10-20 s",
		"the worker's transaction coordinator killed 3 times")
	r.also = func(rep accounting.Report) bool { return javaConsumerAgrees(t, e, rep) }
	for i, at := range r.spread(3, flow/10, flow*3/4) {
		r.sleepUntil(at)
		r.bounce(e.Kafka.TxnCoordinator(t, clusterTxnID(e)), fmt.Sprintf("transaction coordinator, %d of 3", i+1), true, r.down())
	}
	r.finish(flow + 4*time.Minute)
}

// b. SIGKILL of the node that leads the output partitions, then (another
// run) of the input's: the worker's produce requests, or its fetches, move
// to the new leaders elected from the ISR.
func TestClusterFaultLeader(t *testing.T) {
	t.Run("output", func(t *testing.T) { testClusterLeader(t, true) })
	t.Run("input", func(t *testing.T) { testClusterLeader(t, false) })
}

func testClusterLeader(t *testing.T, output bool) {
	which := "input"
	if output {
		which = "output"
	}
	e, r, flow := clusterBegin(t, 200000, 10000, "cluster: SIGKILL leader of the "+which+" partitions, restart after 10-20 s",
		"the node leading most "+which+" partitions killed")
	topic := e.Input
	if output {
		topic = e.Output
	}
	r.killOnce(flow, "leader of "+which, func() int { return mostLeader(e.Kafka.Leaders(t, topic)) })
	r.finish(flow + 4*time.Minute)
}

// mostLeader returns the node that leads the most partitions (the lowest
// such node ID on a tie).
func mostLeader(leaders map[int32]int) int {
	count := map[int]int{}
	for _, n := range leaders {
		count[n]++
	}
	best := 0
	for n, c := range count {
		if best == 0 || c > count[best] || (c == count[best] && n < best) {
			best = n
		}
	}
	return best
}

// c. SIGKILL of the worker's group coordinator: offset commits (sent in
// the transaction, TxnOffsetCommit) and heartbeats move to the node that
// takes over the __consumer_offsets partition.
func TestClusterFaultGroupCoordinator(t *testing.T) {
	e, r, flow := clusterBegin(t, 200000, 10000, "cluster: SIGKILL group coordinator, restart after 10-20 s",
		"the worker's group coordinator killed")
	r.killOnce(flow, "group coordinator", func() int { return e.Kafka.GroupCoordinator(t, e.Group) })
	r.finish(flow + 4*time.Minute)
}

// d. A rolling restart, as a deploy does: each node in turn gets SIGTERM
// (a controlled shutdown), starts again, and the next waits until every
// replica is back in sync.
func TestClusterFaultRollingRestart(t *testing.T) {
	_, r, flow := clusterBegin(t, 400000, 10000, "cluster: rolling restart (SIGTERM each node in turn)",
		"nodes 1, 2, 3 stopped and started in turn")
	r.sleepUntil(flow / 10)
	for node := 1; node <= clusterNodes; node++ {
		r.bounce(node, "rolling restart", false, 2*time.Second)
	}
	r.finish(flow + 4*time.Minute)
}

// e. One node killed halfway through and left down to the end: the rest
// of the run, and the accounting, run at ISR 2, which min.insync.replicas 2
// still accepts. Kafka's console consumer reads the output again with the
// node down.
func TestClusterFaultNodeDown(t *testing.T) {
	e, r, flow := clusterBegin(t, 300000, 10000, "cluster: one node down for the second half (ISR 2)",
		"a random node killed halfway and left down")
	r.also = func(rep accounting.Report) bool { return javaConsumerAgrees(t, e, rep) }
	node := 1 + r.rng.IntN(clusterNodes)
	r.sleepUntil(flow / 2)
	e.Kafka.WaitInSync(t, 3*time.Minute)
	r.m.Instant("SIGKILL node " + strconv.Itoa(node) + ", left down")
	e.Kafka.KillNode(t, node)
	t.Logf("killed node %d at %s (%d orders written); it stays down", node, fmtDur(time.Since(r.start)), r.s.Acked())
	r.finish(flow + 4*time.Minute)
}
