package txnguard

import (
	"context"
	"hash/crc32"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// On a secured Apache Kafka broker (SASL_SSL, StandardAuthorizer), with the
// producer's principal holding no right on the cluster, only what a worker
// holds (WRITE and DESCRIBE on its output, its DLQ and its transactional-ID
// prefix, READ on its input and its group): orphans of the producer's own
// producer ID on both output partitions, the DLQ and the group's offsets
// are ended by the guard before the first produce, with the marker their
// transaction was given, and the next commit shows read_committed readers
// exactly what it should; without the guard the same commit exposes them.
//
// The orphans are built the way a coordinator's lost state leaves them:
// partition verification (KIP-890) is turned off on the test's own broker,
// and transactional batches (Produce v11) and offsets (TxnOffsetCommit v3)
// are appended at epoch E without AddPartitionsToTxn or AddOffsetsToTxn,
// so the coordinator never lists them while the partitions hold them open.
func TestGuardOnRealKafka(t *testing.T) {
	k := testenv.RealKafka(t, testenv.KafkaSecured(testenv.ClientAuthRequired))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := testenv.TxnVerification(ctx, k.Admin(t), false); err != nil {
		t.Fatalf("turn partition verification off: %v", err)
	}
	for _, tc := range []struct {
		name                   string
		guard, commit, ongoing bool
	}{
		{"aborted", true, false, false},
		{"committed", true, true, false},
		{"ongoing", true, false, true},
		{"aborted-without-guard", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testRealOrphans(ctx, t, k, tc.guard, tc.commit, tc.ongoing) })
	}
}

// testRealOrphans builds the orphans and runs the guard (if guard). With
// commit, the old producer's last transaction commits (on out[1], which
// then holds no orphan); with ongoing, it is left open at the coordinator
// (Ongoing, on out[1]), as a producer that died mid-transaction leaves it.
// The guard's metrics must say what it did: one cleanup with its marker,
// the partitions it ended unseen (no READ), no orphan seen, and an
// Ongoing predecessor counted by its state.
func testRealOrphans(ctx context.Context, t *testing.T, k *testenv.KafkaCluster, guard, commit, ongoing bool) {
	in, out, dlq := k.NewTopic(t, 1), k.NewTopic(t, 2), k.NewTopic(t, 1)
	group := in + "-g"
	id := "flakestream-" + group + "-worker-1" // the worker's default transactional ID
	user, pw := k.CreateUser(t, "worker")
	grantWorker(t, k, user, in, out, dlq, group)

	// The old producer, as the worker: its ID and epoch, orphans on out[0],
	// out[1] (aborted case) and dlq[0], and offsets for the group, none of
	// which the coordinator hears of.
	old := k.ClientAs(t, user, pw, kgo.TransactionalID(id), kgo.MaxVersions(kversion.V3_8_0()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	pid, epoch := waitProducerID(ctx, t, old)
	appendOrphan(ctx, t, old, id, out, 0, pid, epoch, "orphan-out0-0", "orphan-out0-1", "orphan-out0-2")
	appendOrphan(ctx, t, old, id, dlq, 0, pid, epoch, "orphan-dlq0-0")
	if !commit && !ongoing {
		appendOrphan(ctx, t, old, id, out, 1, pid, epoch, "orphan-out1-0")
	}
	if err := testenv.PendingOffset(ctx, old, id, group, pid, epoch, in, 0, 7); err != nil {
		t.Fatal(err)
	}
	want := []string{"new-0", "new-1", "new-2", "new-3"}
	if commit {
		// The coordinator commits the old producer's transaction on out[1]
		// at epoch E: the orphans at E belong to a committed transaction
		// whose markers were lost.
		if err := old.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := old.ProduceSync(ctx, &kgo.Record{Topic: out, Partition: 1, Value: []byte("committed-out1")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := old.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		want = append(want, "orphan-out0-0", "orphan-out0-1", "orphan-out0-2", "orphan-dlq0-0", "committed-out1")
	}
	if ongoing {
		// The coordinator hears of this one: it stays Ongoing.
		if err := old.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := old.ProduceSync(ctx, &kgo.Record{Topic: out, Partition: 1, Value: []byte("ongoing-out1")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if !guard {
		want = append(want, "orphan-out0-0", "orphan-out0-1", "orphan-out0-2", "orphan-dlq0-0", "orphan-out1-0")
	}
	probe := k.Client(t)
	if why := testenv.OffsetUnstable(ctx, probe, group, in, 0); why == "" {
		t.Fatal("the group's offsets are stable before the guard: the offsets orphan was not built")
	}

	cl := k.ClientAs(t, user, pw, kgo.TransactionalID(id), kgo.ConsumerGroup(group), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	reg := prometheus.NewRegistry()
	g, err := New(nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if !guard {
		g = nil
	}
	res, err := g.Check(ctx, cl, map[string][]int32{out: {0, 1}, dlq: {0}, ConsumerOffsetsTopic: nil})
	if err != nil {
		t.Fatal(err)
	}
	if guard {
		if res.ProducerID != pid || res.Commit != commit || res.Partitions != 3 || res.Group != group || len(res.Orphans) != 0 {
			t.Fatalf("check %+v, want producer %d, commit %v, 3 partitions and the group, no orphans seen (no READ on the outputs)", res, pid, commit)
		}
		if ongoing && res.CoordinatorState != "Ongoing" {
			t.Fatalf("the coordinator's state %q, want Ongoing", res.CoordinatorState)
		}
		checkRealMetrics(t, g, out, dlq, commit, ongoing)
		// The coordinator writes the markers after EndTxn returns: the
		// offsets are stable a moment later, not at once.
		for why := testenv.OffsetUnstable(ctx, probe, group, in, 0); why != ""; why = testenv.OffsetUnstable(ctx, probe, group, in, 0) {
			if ctx.Err() != nil {
				t.Fatalf("the group's offsets after the guard: %s", why)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*kgo.Record{{Topic: out, Partition: 0}, {Topic: out, Partition: 0}, {Topic: out, Partition: 1}, {Topic: dlq, Partition: 0}} {
		r.Value = []byte("new-" + string(rune('0'+i)))
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", r.Value, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	got := readAllCommitted(ctx, t, k, map[string]int32{out: 2, dlq: 1}, len(want))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
	if !guard {
		return
	}
	// No partition is left hanging: no open transaction of the producer
	// anywhere, and the group's offsets are the committed transaction's
	// (7) or none.
	dp, err := k.Admin(t).DescribeProducers(ctx, kadm.TopicsSet{out: {0: {}, 1: {}}, dlq: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dp.SortedPartitions() {
		for _, ap := range p.ActiveProducers {
			if ap.CurrentTxnStartOffset >= 0 {
				t.Errorf("%s[%d]: producer %d still has a transaction open at offset %d", p.Topic, p.Partition, ap.ProducerID, ap.CurrentTxnStartOffset)
			}
		}
	}
	offs, err := k.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(in, 0)
	switch {
	case commit && (!ok || o.At != 7):
		t.Errorf("the committed transaction's offset: %+v (found %v), want 7", o, ok)
	case !commit && ok && o.At >= 0:
		t.Errorf("the aborted transaction's offset is committed: %+v", o)
	}
}

// checkRealMetrics checks what the guard's metrics say after one check
// under the worker's rights: one cleanup transaction, ended ok with the
// marker commit says; out's two partitions and dlq's one ended unseen (no
// READ to list their producers); no orphan seen; a predecessor's
// transaction found open at the coordinator only when ongoing.
func checkRealMetrics(t *testing.T, g *Guard, out, dlq string, commit, ongoing bool) {
	t.Helper()
	marker, other := "abort", "commit"
	if commit {
		marker, other = other, marker
	}
	open := 0.0
	if ongoing {
		open = 1
	}
	for _, c := range []struct {
		v    *prometheus.CounterVec
		lvs  []string
		want float64
	}{
		{g.m.cleanups, []string{marker, "ok"}, 1},
		{g.m.cleanups, []string{other, "ok"}, 0},
		{g.m.cleanups, []string{marker, "error"}, 0},
		{g.m.partitions, []string{out, "false"}, 2},
		{g.m.partitions, []string{dlq, "false"}, 1},
		{g.m.partitions, []string{out, "true"}, 0},
		{g.m.seen, []string{out}, 0},
		{g.m.seenOld, []string{out}, 0},
		{g.m.coordinatorOpen, []string{"Ongoing"}, open},
		{g.m.coordinatorOpen, []string{"PrepareCommit"}, 0},
	} {
		if got := testutil.ToFloat64(c.v.WithLabelValues(c.lvs...)); got != c.want {
			t.Errorf("%v: %v, want %v", c.lvs, got, c.want)
		}
	}
}

// grantWorker grants user what docs/security.md's table gives run: READ
// on in, WRITE and DESCRIBE on out and dlq, READ on group, WRITE and
// DESCRIBE on the transactional IDs prefixed flakestream-<group>-. Nothing
// on the cluster.
func grantWorker(t *testing.T, k *testenv.KafkaCluster, user, in, out, dlq, group string) {
	t.Helper()
	k.GrantCommand(t, user, "run", map[string]string{"input": in, "output": out, "dlq": dlq, "group": group})
}

// waitProducerID initialises cl's producer ID, waiting for ACLs just
// created to reach the broker's authorizer.
func waitProducerID(ctx context.Context, t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	for {
		pid, epoch, err := cl.ProducerID(ctx)
		if err == nil {
			return pid, epoch
		}
		if ctx.Err() != nil || !kafkaacl.Is(err) {
			t.Fatalf("producer ID: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readAllCommitted reads every partition of topics (name -> partitions)
// with read_committed until it has n values or a second passes without
// more after that, and returns them.
func readAllCommitted(ctx context.Context, t *testing.T, k *testenv.KafkaCluster, topics map[string]int32, n int) []string {
	t.Helper()
	parts := map[string]map[int32]kgo.Offset{}
	for _, tp := range slices.Sorted(maps.Keys(topics)) {
		parts[tp] = map[int32]kgo.Offset{}
		for p := range topics[tp] {
			parts[tp][p] = kgo.NewOffset().AtStart()
		}
	}
	r := k.Client(t, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumePartitions(parts))
	var got []string
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := r.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("read_committed: saw %v", got)
		}
		before := len(got)
		fs.EachRecord(func(rec *kgo.Record) { got = append(got, string(rec.Value)) })
		if len(got) >= n && len(got) == before {
			return got
		}
	}
}

// appendOrphan appends one transactional batch of values to tp[p] for
// producer pid at epoch with Produce v11 (no implicit AddPartitionsToTxn).
func appendOrphan(ctx context.Context, t *testing.T, cl *kgo.Client, txnID, tp string, p int32, pid int64, epoch int16, values ...string) {
	t.Helper()
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a one-byte varint length, then the body
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x0010, // transactional
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: 0, NumRecords: int32(len(values)), Records: recs,
	}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	raw = b.AppendTo(nil)

	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	req.TransactionID = kmsg.StringPtr(txnID)
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("append the orphan: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("append the orphan to %s[%d]: %v", tp, p, err)
	}
}
