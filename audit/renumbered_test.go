package audit

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

// withNumber returns a copy of r (a numbered record read back) to write to
// its topic and partition again, its number header set to id (or kept,
// with id < 0) and, if src is set, its source header set to src.
func withNumber(r *kgo.Record, id int64, src string) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: time.Now()}
	for _, h := range r.Headers {
		switch {
		case h.Key == codec.HeaderNumber && id >= 0:
			h.Value = strconv.AppendInt(nil, id, 10)
		case h.Key == codec.HeaderSource && src != "":
			h.Value = []byte(src)
		}
		c.Headers = append(c.Headers, h)
	}
	return c
}

// numberOfRecord returns the number header of a record read back.
func numberOfRecord(t testing.TB, r *kgo.Record) int64 {
	t.Helper()
	v, _ := accounting.Header(r, codec.HeaderNumber)
	n, err := codec.ParseNumber([]byte(v))
	if err != nil {
		t.Fatalf("%s/%d/%d: number header %q: %v", r.Topic, r.Partition, r.Offset, v, err)
	}
	return n
}

// The worker numbers orders; then, as a broken exactly-once would, one of
// its output records is written again with another number (same source),
// another is copied as is (same source, same number), and a third order is
// written again from another source with another number (an order that
// arrived twice upstream). The audit, with --key field:order_ref, flags
// exactly: the renumbered copy and the key's second number renumbered, each
// naming its first copy; the plain copy duplicate (and, appended after
// newer numbers, backwards), not renumbered; every other record clean.
func TestAuditRenumberedEndToEnd(t *testing.T) {
	e := pipetest.NewEnv(t, 2)
	auditTopic := e.Out + ".audit"
	e.Kafka.CreateTopic(t, auditTopic, 2)
	e.Produce(t, 200, orders.Mix{})
	startWorker(t, e)
	rep := e.WaitOutput(t, 60*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	out, err := e.ReadTopic(e.Out)
	if err != nil || len(out) != 200 {
		t.Fatalf("read %d output records: %v", len(out), err)
	}

	l := idgen.DefaultLayout()
	fresh := func(seq int64) int64 { return mustCompose(t, l, time.Now(), 1, 1, 4000+seq) }
	renum, copied, twice := out[10], out[20], out[30]
	srcOf := func(r *kgo.Record) string { s, _ := accounting.Header(r, codec.HeaderSource); return s }
	injected := []*kgo.Record{
		withNumber(renum, fresh(0), ""),
		withNumber(copied, -1, ""),
		withNumber(twice, fresh(1), e.Input+"/0/999999"),
	}
	produceTo(t, e.Kafka, injected...)

	run := startAuditor(t, e.Kafka.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{e.Out} }), Topic(auditTopic), setLoop(func(s *eos.Config) { s.Group = e.Out + "-audit"; s.InstanceID = "a" }), AllowedServers(1), Key(pipeline.KeySpec{Field: "order_ref"}))
	waitAudited(t, 203, run)
	run.stop(t)
	got := readAudit(t, e.Kafka, auditTopic, 2)
	if len(got) != 203 {
		t.Fatalf("%d audit records, want 203", len(got))
	}
	firstOf := func(r *kgo.Record) *codec.Copy {
		return &codec.Copy{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, ID: numberOfRecord(t, r)}
	}
	type flags struct {
		anomalies []string
		first     *codec.Copy
	}
	want := map[string]flags{}
	// The injected records, found by source and number among the audit
	// records (the copy by its location, not the original's).
	find := func(src string, id int64, notAt string) (string, codec.AuditRecord) {
		t.Helper()
		for loc, a := range got {
			if a.Source == src && a.ID == id && loc != notAt {
				return loc, a
			}
		}
		t.Fatalf("no audit record from %s numbered %d", src, id)
		return "", codec.AuditRecord{}
	}
	loc := func(r *kgo.Record) string { return string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)) }
	l1, _ := find(srcOf(renum), numberOfRecord(t, injected[0]), "")
	l2, _ := find(srcOf(copied), numberOfRecord(t, copied), loc(copied))
	l3, _ := find(e.Input+"/0/999999", numberOfRecord(t, injected[2]), "")
	want[l1] = flags{[]string{"renumbered"}, firstOf(renum)}
	// Appended after newer numbers, the plain copy also goes backwards.
	want[l2] = flags{[]string{"duplicate", "backwards"}, nil}
	want[l3] = flags{[]string{"renumbered"}, firstOf(twice)}
	for l, a := range got {
		w := want[l]
		if !reflect.DeepEqual(a.Anomalies, w.anomalies) || !reflect.DeepEqual(a.FirstCopy, w.first) {
			t.Errorf("%s: anomalies %q first copy %+v, want %q %+v", l, a.Anomalies, a.FirstCopy, w.anomalies, w.first)
		}
	}
	s := run.a.Stats()
	if s.Anomalies["renumbered"] != 2 || s.Anomalies["duplicate"] != 1 || s.Clean != 200 {
		t.Fatalf("stats %+v: want 2 renumbered, 1 duplicate, 200 clean", s)
	}
	if m := counterValue(run.a.m.anomalies.WithLabelValues("renumbered")); m != 2 {
		t.Fatalf("flakestream_audit_anomalies_total{kind=\"renumbered\"} = %v, want 2", m)
	}
	if s.OrderEntries != 401 {
		t.Fatalf("%d orders held, want 401 (201 sources and 200 keys)", s.OrderEntries)
	}
}

// On a real Apache Kafka broker: while the audit runs, a copy of a
// numbered record is written with another number, and the audit flags it
// renumbered, naming the first copy, within seconds.
func TestAuditRenumberedRealKafka(t *testing.T) {
	k := testenv.RealKafka(t)
	renumberedLive(t, k)
}

// The same on whatever Kafka testenv gives (kfake by default).
func TestAuditRenumberedLive(t *testing.T) {
	renumberedLive(t, testenv.Kafka(t))
}

func renumberedLive(t *testing.T, k *testenv.KafkaCluster) {
	topic := k.NewTopic(t, 2)
	auditTopic := topic + ".audit"
	k.CreateTopic(t, auditTopic, 2)
	recs := cleanStream(t, topic, 2, 100, time.Now().Add(-2*time.Second))
	for i, r := range recs {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: codec.HeaderSource,
			Value: codec.AppendSource(nil, "orders", r.Partition, int64(i/2))})
	}
	produceTo(t, k, recs...)
	run := startAuditor(t, k.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(auditTopic), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "live" }))
	waitAudited(t, 100, run)
	if s := run.a.Stats(); s.Clean != 100 {
		t.Fatalf("stats %+v: want 100 clean", s)
	}

	// Record 7 (partition 1, offset 3) again, with another number.
	orig := recs[7]
	first := &codec.Copy{Topic: topic, Partition: 1, Offset: 3, ID: mustParse(t, orig)}
	again := mustCompose(t, idgen.DefaultLayout(), time.Now(), 1, 3, 4095)
	injected := time.Now()
	produceTo(t, k, withNumber(orig, again, ""))
	if !accounting.WaitFor(30*time.Second, func() bool { return run.a.Stats().Anomalies["renumbered"] == 1 }) {
		t.Fatalf("no renumbered within 30s: stats %+v", run.a.Stats())
	}
	took := time.Since(injected) // a figure to read, not to assert: the machine's load sets it
	t.Logf("renumbered flagged %v after the copy was written (%s)", took.Round(time.Millisecond), k.Kind)
	run.stop(t)
	got := readAudit(t, k, auditTopic, 2)
	var flagged []codec.AuditRecord
	for _, a := range got {
		if a.Anomalies != nil {
			flagged = append(flagged, a)
		}
	}
	if len(flagged) != 1 || !reflect.DeepEqual(flagged[0].Anomalies, []string{"renumbered"}) ||
		!reflect.DeepEqual(flagged[0].FirstCopy, first) || flagged[0].ID != again || flagged[0].Source != "orders/1/3" {
		t.Fatalf("flagged %+v, want one renumbered record numbered %d naming %+v", flagged, again, first)
	}
}

func mustParse(t testing.TB, r *kgo.Record) int64 {
	t.Helper()
	n, err := strconv.ParseInt(string(r.Headers[0].Value), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
