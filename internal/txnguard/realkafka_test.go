package txnguard

import (
	"context"
	"hash/crc32"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// On Apache Kafka: an orphan built the way the broker crash leaves one (the
// partition holds an open transaction of our producer ID that the
// coordinator never listed), aborted by the guard, and the next commit shows
// only its own records to a read_committed reader; without the guard the
// same commit exposes the orphan.
//
// The orphan: partition verification (KIP-890) is turned off on the test's
// own broker, and a transactional batch is appended with Produce v11 at
// epoch E without AddPartitionsToTxn, so the coordinator keeps the
// transaction Empty while the partition holds it open. Then the same
// transactional ID starts again at a higher epoch.
func TestGuardOnRealKafka(t *testing.T) {
	for _, guard := range []bool{true, false} {
		t.Run("guard="+strconv.FormatBool(guard), func(t *testing.T) { testRealOrphan(t, guard) })
	}
}

func testRealOrphan(t *testing.T, guard bool) {
	k := testenv.RealKafka(t, testenv.KafkaRestartable())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := k.Admin(t)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "transaction.partition.verification.enable", Value: kadm.StringPtr("false")}})
	for _, r := range rs {
		if err == nil && r.Err != nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("turn partition verification off: %v", err)
	}
	tp := k.NewTopic(t, 1)
	id := tp + "-txn"

	// The old producer: its ID and epoch, then one transactional batch
	// the coordinator never hears of.
	old := k.Client(t, kgo.TransactionalID(id), kgo.MaxVersions(kversion.V3_8_0()))
	pid, epoch, err := old.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendOrphan(ctx, t, old, tp, pid, epoch, "orphan-0", "orphan-1", "orphan-2")

	cl := k.Client(t, kgo.TransactionalID(id), kgo.DefaultProduceTopic(tp), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	g, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !guard {
		g = nil
	}
	aborts, err := g.Check(ctx, cl, map[string][]int32{tp: {0}})
	if err != nil {
		t.Fatal(err)
	}
	if guard {
		if len(aborts) != 1 || aborts[0].ProducerID != pid || aborts[0].Epoch != epoch || aborts[0].StartOffset != 0 || aborts[0].Committed {
			t.Fatalf("aborts %+v, want the orphan of producer %d epoch %d at offset 0 aborted", aborts, pid, epoch)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"new-0", "new-1"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	r := k.Client(t, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp: {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for !slices.Contains(got, "new-1") {
		fs := r.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed: no new-1 within the bound; saw %v", got)
		}
		fs.EachRecord(func(rec *kgo.Record) { got = append(got, string(rec.Value)) })
	}
	want := []string{"new-0", "new-1"}
	if !guard {
		want = []string{"orphan-0", "orphan-1", "orphan-2", "new-0", "new-1"}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}

// appendOrphan appends one transactional batch of values to tp[0] for
// producer pid at epoch with Produce v11 (no implicit AddPartitionsToTxn).
func appendOrphan(ctx context.Context, t *testing.T, cl *kgo.Client, tp string, pid int64, epoch int16, values ...string) {
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
	req.TransactionID = kmsg.StringPtr(tp + "-txn")
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("append the orphan: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("append the orphan: %v", err)
	}
}
