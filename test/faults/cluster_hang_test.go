package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/testenv"
)

// Hang faults on the 3-node cluster (issue 19), beside the cluster's kill
// faults: the worker runs with --txn-timeout 5s and --session-timeout 10s,
// and each hang lasts 15 s or more, longer than both.

// clusterFaultAt is faultAt, and then waits until every replica is in
// sync.
func (r *run) clusterFaultAt() {
	r.faultAt()
	r.e.Kafka.WaitInSync(r.t, 3*time.Minute)
}

// d. The workers cut off from the node that coordinates their
// transactional ID, and from nothing else, for 15 s. The node stays in the
// cluster (the other nodes and the test reach it), so the coordinator does
// not move: the worker's EndTxn and AddPartitionsToTxn hang, the
// coordinator times out the open transaction and bumps the epoch, and the
// partitions that node leads are out of the worker's reach. When the
// packets flow again the worker is fenced and starts a new session.
func TestClusterFaultPartitionTxnCoordinator(t *testing.T) {
	testenv.NeedNetFaults(t)
	e, r, flow := clusterBegin(t, 300000, 10000, "cluster: workers cut off from the txn coordinator's node 15 s",
		"the workers' listener of the transaction coordinator's node dropped (iptables)", testenv.KafkaClientListener())
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.clusterFaultAt()
	node := e.Kafka.TxnCoordinator(t, clusterTxnID(e))
	r.partition(fmt.Sprintf("workers' port of node %d (txn coordinator) dropped 15s", node), 15*time.Second,
		port(t, e.Kafka.ClientAddrs[node-1]))
	r.finish(flow + 4*time.Minute)
}

// h. The node that coordinates the worker's transactional ID paused
// (SIGSTOP of its JVM) for 15 s, then resumed. The other nodes stop
// hearing from it (broker.session.timeout.ms, 9 s) and move its
// leaderships and its coordinators away; when it resumes it is a zombie
// broker that still believes in its old leaderships and coordinator role,
// until the controller's newer epochs fence it.
func TestClusterFaultPauseTxnCoordinator(t *testing.T) {
	e, r, flow := clusterBegin(t, 300000, 10000, "cluster: txn coordinator's node SIGSTOPped 15 s",
		"the transaction coordinator's node paused")
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.clusterFaultAt()
	node := e.Kafka.TxnCoordinator(t, clusterTxnID(e))
	r.pause(fmt.Sprintf("node %d (txn coordinator) SIGSTOP 15s", node), e.Kafka.NodePID(t, node), 15*time.Second)
	r.finish(flow + 4*time.Minute)
}

// c. One node cut off from the other two for 20 s: every packet it sends
// to their broker (replication) and controller ports is dropped, and every
// packet they send to its own, while clients (the workers, the test) still
// reach all three. The node chosen leads the most output partitions. The
// other two fence it (broker.session.timeout.ms, 9 s) and elect new
// leaders from the ISR; it still believes in its old leaderships, and a
// write it takes as that old leader cannot reach min.insync.replicas 2, so
// it must never be acknowledged, and nothing the worker relies on may stay
// with it. Each node's JVM runs in a cgroup of its own
// (scripts/kafka-local --cgroups), which is how its packets are told apart
// on loopback from the clients' packets to the same ports.
func TestClusterFaultIsolateNode(t *testing.T) {
	testenv.NeedNetFaults(t)
	testenv.NeedCgroups(t)
	e, r, flow := clusterBegin(t, 300000, 10000, "cluster: a node cut off from the other two 20 s",
		"the node leading most output partitions isolated from the others (iptables, cgroups); clients reach all",
		testenv.KafkaNodeCgroups())
	r.also = func(accounting.Report) bool { r.fenceEvidence(); return true }
	r.clusterFaultAt()
	x := mostLeader(e.Kafka.Leaders(t, e.Output))
	name := fmt.Sprintf("node %d (leads most output partitions) isolated 20s", x)
	type cut struct {
		cgroup string
		ports  []int
	}
	var plan []cut
	bx, cx := e.Kafka.NodePorts(t, x)
	for o := 1; o <= clusterNodes; o++ {
		if o == x {
			continue
		}
		bo, co := e.Kafka.NodePorts(t, o)
		plan = append(plan, cut{e.Kafka.NodeCgroup(t, x), []int{bo, co}}, cut{e.Kafka.NodeCgroup(t, o), []int{bx, cx}})
	}
	f := r.m.Begin(name)
	var cuts []*testenv.Partition
	for _, c := range plan {
		cuts = append(cuts, testenv.DropFromCgroup(t, name, c.cgroup, c.ports...))
	}
	time.Sleep(20 * time.Second)
	for _, c := range cuts {
		c.Heal(t)
	}
	r.m.End(f)
	t.Logf("%s at %s (%d orders written by its end); leaders of the output now %v", name, fmtDur(f.At.Sub(r.start)), r.s.Acked(),
		e.Kafka.Leaders(t, e.Output))
	r.finish(flow + 4*time.Minute)
}
