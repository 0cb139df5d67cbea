package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A worker that has committed and then has nothing to read ends, within
// its transaction timeout, what a lost commit marker left pending on its
// group's offsets. On Apache Kafka a coordinator that restarts uncleanly
// can lose the markers of a transaction that committed (KAFKA-20734): its
// offsets stay pending, every offset fetch of the group's members answers
// UNSTABLE_OFFSET_COMMIT, and the member given those partitions next
// polls nothing, so without this no marker ever comes. The lost marker is
// made as the guard's own test makes one (testenv.PendingOffset), for the
// worker's producer, right after the worker's last commit. Then the stream
// goes on, exactly once.
func TestIdleWorkerEndsPendingOffsets(t *testing.T) {
	e := newEnv(t, 2, false)
	if !e.Kafka.Real() {
		t.Skip("needs Apache Kafka: kfake keeps no pending transactional offsets")
	}
	// Longer than making the lost marker takes, however loaded the
	// machine: the worker's idle guard must come after it.
	const txnTimeout = 30 * time.Second
	tid := e.Group + "-worker"
	e.Produce(t, 200, orders.Mix{})
	e.StartWorker(t, "idle", "--lanes", "1", "--transactional-id", tid, "--txn-timeout", txnTimeout.String())
	if _, ok := e.WaitCommitted(t, 2*time.Minute); !ok {
		t.Fatal("the worker did not commit the first 200 orders in 2 minutes")
	}
	made := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	adm := e.Kafka.Admin(t)
	if err := testenv.TxnVerification(ctx, adm, false); err != nil {
		t.Error(err)
	}
	t.Cleanup(func() {
		if err := testenv.TxnVerification(context.Background(), adm, true); err != nil {
			t.Error(err)
		}
	})
	txns, err := adm.DescribeTransactions(ctx, tid)
	if err != nil {
		t.Fatal(err)
	}
	d := txns[tid]
	if d.Err != nil || d.State != "CompleteCommit" {
		t.Fatalf("the worker's transactional ID %s: state %q, err %v; want CompleteCommit", tid, d.State, d.Err)
	}
	offs, err := adm.FetchOffsets(ctx, e.Group)
	if err != nil {
		t.Fatal(err)
	}
	at, ok := offs.Lookup(e.Input, 0)
	if !ok {
		t.Fatalf("no committed offset of %s[0]", e.Input)
	}
	// The pending offset is the committed one: the guard's marker (COMMIT,
	// as the last transaction committed) changes nothing but its state.
	old := e.Kafka.Client(t, kgo.MaxVersions(kversion.V3_8_0()))
	if err := testenv.PendingOffset(ctx, old, tid, e.Group, d.ProducerID, d.ProducerEpoch, e.Input, 0, at.At); err != nil {
		t.Fatal(err)
	}
	probe := e.Kafka.Client(t)
	if why := testenv.OffsetUnstable(ctx, probe, e.Group, e.Input, 0); why == "" {
		t.Fatal("the group's offsets are stable after the pending offset was written: the lost marker was not made")
	}
	for why := testenv.OffsetUnstable(ctx, probe, e.Group, e.Input, 0); why != ""; why = testenv.OffsetUnstable(ctx, probe, e.Group, e.Input, 0) {
		if ctx.Err() != nil {
			t.Fatalf("the group's offsets still pending %s after the lost marker: %s", time.Since(made).Round(time.Second), why)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the idle worker ended the pending offsets %s after they were made (transaction timeout %s)",
		time.Since(made).Round(time.Second), txnTimeout)
	e.Produce(t, 200, orders.Mix{})
	if rep := e.Check(t, 2*time.Minute); !rep.OK() {
		t.Fatalf("after the pending offsets were ended: %s", rep)
	}
}
