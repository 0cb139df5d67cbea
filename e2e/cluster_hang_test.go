package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/testenv"
	"github.com/flakestream/flakestream/internal/verify"
)

// Hang faults on the 3-node cluster (issue 19), beside the cluster's kill
// faults: the worker runs with --txn-timeout 5s and --session-timeout 10s,
// and each hang lasts 15 s, longer than both.

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
	r.also = func(verify.Report) bool { r.fenceEvidence(); return true }
	r.faultAt()
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
	r.also = func(verify.Report) bool { r.fenceEvidence(); return true }
	r.faultAt()
	e.Kafka.WaitInSync(t, 3*time.Minute)
	node := e.Kafka.TxnCoordinator(t, clusterTxnID(e))
	r.pause(fmt.Sprintf("node %d (txn coordinator) SIGSTOP 15s", node), e.Kafka.NodePID(t, node), 15*time.Second)
	r.finish(flow + 4*time.Minute)
}
