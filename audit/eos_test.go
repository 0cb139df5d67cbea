package audit

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The exactly-once side of the audit: aborted transactions, rebalances,
// restarts, and the at-least-once mode without an audit topic.

// cleanStream returns n clean numbered records over parts partitions,
// numbers increasing in each, from server 1, worker 3.
func cleanStream(t testing.TB, topic string, parts int32, n int, from time.Time) []*kgo.Record {
	l := idgen.DefaultLayout()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := mustCompose(t, l, from.Add(time.Duration(i/100)*time.Millisecond), 1, 3, int64(i%100))
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i) % parts, Value: []byte(`{}`), Timestamp: time.Now(),
			Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(strconv.FormatInt(id, 10))}}}
	}
	return recs
}

// requireClean checks that the audit topic has exactly one record for each
// of want records, none with an anomaly.
func requireClean(t testing.TB, k *testenv.KafkaCluster, topic string, parts int32, want int) {
	t.Helper()
	got := readAudit(t, k, topic, parts)
	if len(got) != want {
		t.Fatalf("%d audit records, want %d", len(got), want)
	}
	for loc, a := range got {
		if a.Anomalies != nil {
			t.Fatalf("%s flagged %v in a clean stream", loc, a.Anomalies)
		}
	}
}

// failFirstProduce makes the first produce request to topic fail with a
// non-retriable error, so the transaction carrying it aborts.
func failFirstProduce(t testing.TB, k *testenv.KafkaCluster, topic string) *atomic.Bool {
	t.Helper()
	fake := k.Fake()
	if fake == nil {
		t.Skip("needs kfake to fail a produce request")
	}
	details, err := k.Admin(t).ListTopics(context.Background(), topic)
	if err != nil || details[topic].Err != nil {
		t.Fatalf("topic id of %s: %v", topic, err)
	}
	id := details[topic].ID
	var failed atomic.Bool
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		hit := false
		for _, pt := range pr.Topics {
			hit = hit || pt.Topic == topic || pt.TopicID == [16]byte(id)
		}
		if !hit || failed.Load() {
			return nil, nil, false
		}
		failed.Store(true)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, pt := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = pt.Topic, pt.TopicID
			for _, pp := range pt.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pp.Partition, kerr.InvalidRecord.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	return &failed
}

// A transaction that aborts (here: its produce fails) leaves no trace in
// the detector: its records, audited again, are not duplicates of
// themselves, and the audit topic has each exactly once.
func TestAuditAbortedTransactionIsNotADuplicate(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 3)
	audit := topic + ".audit"
	k.CreateTopic(t, audit, 3)
	failed := failFirstProduce(t, k, audit)
	recs := cleanStream(t, topic, 3, 3000, time.Now().Add(-time.Second))
	produceTo(t, k, recs...)
	run := startAuditor(t, k.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(audit), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "a" }))
	waitAudited(t, int64(len(recs)), run)
	requireClean(t, k, audit, 3, len(recs))
	if s := run.a.Stats(); !failed.Load() || s.Aborted == 0 || s.Anomalies["duplicate"] != 0 {
		t.Fatalf("produce failed %v, stats %+v: want an aborted transaction and no duplicate", failed.Load(), s)
	}
}

// Two auditors in one group, the second joining and the first leaving while
// records flow: every rebalance moves partitions (the catch-up runs) and
// aborts open transactions, and the audit topic is still exactly once and
// clean.
func TestAuditRebalance(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 6)
	audit := topic + ".audit"
	k.CreateTopic(t, audit, 6)
	recs := cleanStream(t, topic, 6, 12000, time.Now().Add(-10*time.Second))
	opts := []Opt{setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(audit), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.MaxPollRecords = 300 })}
	chunk := func(i int) { produceTo(t, k, recs[i*1000:(i+1)*1000]...); time.Sleep(100 * time.Millisecond) }
	a := startAuditor(t, k.Addrs, append(opts, setLoop(func(s *eos.Config) { s.InstanceID = "a" }))...)
	for i := range 4 {
		chunk(i)
	}
	b := startAuditor(t, k.Addrs, append(opts, setLoop(func(s *eos.Config) { s.InstanceID = "b" }))...)
	for i := 4; i < 8; i++ {
		chunk(i)
	}
	a.stop(t)
	for i := 8; i < 12; i++ {
		chunk(i)
	}
	waitAudited(t, int64(len(recs)), a, b)
	requireClean(t, k, audit, 6, len(recs))
	sa, sb := a.a.Stats(), b.a.Stats()
	if sa.Audited == 0 || sb.Audited == 0 || sa.Audited+sb.Audited != int64(len(recs)) {
		t.Fatalf("audited a %d + b %d of %d: one did nothing, or counts do not add up", sa.Audited, sb.Audited, len(recs))
	}
	t.Logf("a: %d audited, %d aborted; b: %d audited, %d aborted, %d read to catch up", sa.Audited, sa.Aborted, sb.Audited, sb.Aborted, sb.CaughtUp)
}

// After a restart, the catch-up reads back what the earlier run audited:
// a duplicate of an earlier number, and a step back from the partition's
// last number, are still flagged. Without the catch-up they are not (the
// limit it removes).
func TestAuditCatchUpAfterRestart(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("catch-up %v", on), func(t *testing.T) {
			k := testenv.Kafka(t)
			topic := k.NewTopic(t, 2)
			audit := topic + ".audit"
			k.CreateTopic(t, audit, 2)
			recs := cleanStream(t, topic, 2, 200, time.Now().Add(-2*time.Second))
			produceTo(t, k, recs...)
			opts := []Opt{setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(audit), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "a" }), CatchUp(on, 20*time.Second)}
			first := startAuditor(t, k.Addrs, opts...)
			waitAudited(t, 200, first)
			first.stop(t)

			// recs[100] is an earlier number of partition 0 (below its last,
			// recs[198]); recs[199] is the last number of partition 1.
			again := []*kgo.Record{
				{Topic: topic, Partition: 0, Value: []byte(`{}`), Timestamp: time.Now(), Headers: recs[100].Headers},
				{Topic: topic, Partition: 1, Value: []byte(`{}`), Timestamp: time.Now(), Headers: recs[199].Headers},
			}
			produceTo(t, k, again...)
			second := startAuditor(t, k.Addrs, opts...)
			waitAudited(t, 2, second)
			got := readAudit(t, k, audit, 2)
			want := [][]string{{"duplicate", "backwards"}, {"duplicate"}}
			if !on {
				want = [][]string{nil, nil}
			}
			for i, r := range again {
				a := got[string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))]
				if !reflect.DeepEqual(a.Anomalies, want[i]) {
					t.Errorf("record %d after the restart: %q, want %q", i, a.Anomalies, want[i])
				}
			}
			if s := second.a.Stats(); on && s.CaughtUp != 200 {
				t.Errorf("caught up on %d records, want the 200 of the first run", s.CaughtUp)
			}
		})
	}
}

// Without an audit topic the auditor writes JSON lines and commits after:
// a restart in the same group writes nothing again.
func TestAuditStdoutOnly(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 2)
	recs := cleanStream(t, topic, 2, 500, time.Now().Add(-time.Second))
	produceTo(t, k, recs...)
	var out harness.SyncBuffer
	opts := []Opt{setLoop(func(s *eos.Config) { s.Topics = []string{topic}; s.Group = topic + "-audit" }), Stdout(&out)}
	run := startAuditor(t, k.Addrs, opts...)
	waitAudited(t, 500, run)
	run.stop(t)
	if run.a.TransactionalID() != "" {
		t.Fatalf("transactional ID %q without an audit topic", run.a.TransactionalID())
	}
	produceTo(t, k, cleanStream(t, topic, 2, 10, time.Now())...)
	again := startAuditor(t, k.Addrs, opts...)
	waitAudited(t, 10, again)
	again.stop(t)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		a, err := codec.ParseAuditRecord([]byte(l))
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		loc := string(codec.AppendSource(nil, a.Topic, a.Partition, a.Offset))
		if seen[loc] {
			t.Fatalf("%s written twice", loc)
		}
		seen[loc] = true
	}
	if len(lines) != 510 || again.a.Stats().Audited != 10 {
		t.Fatalf("%d lines, second run audited %d: want 510 and 10", len(lines), again.a.Stats().Audited)
	}
}
