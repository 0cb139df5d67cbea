package audit

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// setLoop changes the loop's settings from a test's option list, so that
// the helpers below can take a test's settings and options as one list.
func setLoop(f func(*eos.Config)) Opt { return func(c *cfg) { f(&c.eos) } }

// auditRun is an auditor running in a goroutine of the test.
type auditRun struct {
	a *Auditor
	*pipetest.Running
}

// startAuditor runs an auditor on brokers until stop or the end of the test.
func startAuditor(t testing.TB, brokers []string, opts ...Opt) *auditRun {
	t.Helper()
	s := eos.Config{Brokers: brokers, TransactionTimeout: 5 * time.Second,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, Logger: pipetest.Logger(t)}
	a, err := New(s, append([]Opt{CatchUp(true, 20*time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &auditRun{a: a, Running: pipetest.Go(t, "auditor", a.Run)}
}

func (r *auditRun) stop(t testing.TB) { r.Stop(t) }

// startWorker runs the worker that numbers e's input into e's output.
func startWorker(t testing.TB, e *pipetest.Env) {
	t.Helper()
	w, err := pipeline.NewWorker(eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group,
		InstanceID: "w", TransactionTimeout: 5 * time.Second, Logger: pipetest.Logger(t)},
		pipeline.OutputTopic(e.Out), pipeline.DLQTopic(e.DLQ), pipeline.Numbers(e.Generator(t, 1)), pipeline.Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	pipetest.Go(t, "worker", w.Run)
}

// waitAudited waits until the auditors together have audited n records.
func waitAudited(t testing.TB, n int64, runs ...*auditRun) {
	t.Helper()
	sum := func() (s int64) {
		for _, r := range runs {
			s += r.a.Stats().Audited
		}
		return s
	}
	if !accounting.WaitFor(60*time.Second, func() bool { return sum() >= n }) {
		t.Fatalf("audited %d of %d records", sum(), n)
	}
}

// readAudit reads every committed audit record, parsed, checking that each
// numbered record has exactly one, keyed and partitioned as promised.
func readAudit(t testing.TB, k *testenv.KafkaCluster, topic string, parts int32) map[string]codec.AuditRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := accounting.ReadCommitted(ctx, k.Addrs, topic)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	out := map[string]codec.AuditRecord{}
	for _, r := range recs {
		a, err := codec.ParseAuditRecord(r.Value)
		if err != nil {
			t.Fatalf("audit record %s/%d/%d: %v: %s", r.Topic, r.Partition, r.Offset, err, r.Value)
		}
		loc := string(codec.AppendSource(nil, a.Topic, a.Partition, a.Offset))
		if _, dup := out[loc]; dup {
			t.Fatalf("two audit records for %s: not exactly once", loc)
		}
		out[loc] = a
		wantKey := loc
		switch {
		case a.Valid:
			wantKey = strconv.FormatInt(a.ID, 10)
		case a.Source != "":
			wantKey = a.Source
		}
		if string(r.Key) != wantKey || r.Partition != a.Partition%parts {
			t.Fatalf("audit record of %s: key %q partition %d, want %q and %d", loc, r.Key, r.Partition, wantKey, a.Partition%parts)
		}
	}
	return out
}

// produceTo writes records straight to Kafka, as a third-party client
// would, in order per partition; the records get their offsets.
func produceTo(t testing.TB, k *testenv.KafkaCluster, recs ...*kgo.Record) {
	t.Helper()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// thirdParty builds records for a numbered topic the way a third-party
// client writes them: the number in a header, in the JSON field as a string
// or as an integer, or not at all.
type thirdParty struct {
	topic string
	l     idgen.Layout
	now   time.Time
	recs  []*kgo.Record
	want  map[*kgo.Record][]string // anomalies expected; absent: none
}

func (tp *thirdParty) id(t testing.TB, d time.Duration, server, worker, seq int64) int64 {
	t.Helper()
	return mustCompose(t, tp.l, tp.now.Add(d), server, worker, seq)
}

func (tp *thirdParty) add(p int32, value string, number int64, ts time.Time, want ...string) *kgo.Record {
	r := &kgo.Record{Topic: tp.topic, Partition: p, Value: []byte(value), Timestamp: ts}
	if number >= 0 {
		r.Headers = []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(strconv.FormatInt(number, 10))}}
	}
	tp.recs = append(tp.recs, r)
	if len(want) > 0 {
		tp.want[r] = want
	}
	return r
}

// The done-when of the audit: records from the worker and records written
// straight to a numbered topic by a third party are audited exactly once;
// each injected fault is flagged with exactly its anomaly, and every clean
// record with none.
func TestAuditEndToEnd(t *testing.T) {
	e := pipetest.NewEnv(t, 3)
	third := e.Kafka.NewTopic(t, 4)
	auditTopic := third + ".audit"
	e.Kafka.CreateTopic(t, auditTopic, 2)

	// The worker numbers 3,000 clean orders (server 1, worker 1).
	e.Produce(t, 3000, orders.Mix{})
	startWorker(t, e)

	// A third party writes numbers of server 1, worker 2, and faults.
	now := time.Now()
	tp := &thirdParty{topic: third, l: idgen.DefaultLayout(), now: now, want: map[*kgo.Record][]string{}}
	var clean int
	c := func(p int32, d time.Duration, seq int64) int64 {
		clean++
		id := tp.id(t, d, 1, 2, seq)
		tp.add(p, `{"order_ref":"ORD-`+strconv.Itoa(clean)+`"}`, id, now)
		return id
	}
	field := func(p int32, value string, ts time.Time, want ...string) { tp.add(p, value, -1, ts, want...) }
	// p0: a duplicated number, and a number lower than its predecessor.
	c(0, -3*time.Second, 0)
	dup := c(0, -3*time.Second, 1)
	tp.add(0, `{"order_ref":"again"}`, dup, now, "duplicate")
	c(0, -2*time.Second, 0)
	tp.add(0, `{}`, tp.id(t, -2500*time.Millisecond, 1, 2, 0), now, "backwards")
	c(0, -time.Second, 0)
	// p1: a foreign server, no number, garbage bytes, numbers in the field.
	field(1, `{"order_no":"`+strconv.FormatInt(tp.id(t, -3*time.Second, 1, 2, 5), 10)+`"}`, now)
	tp.add(1, `{}`, tp.id(t, -2*time.Second, 7, 2, 0), now, "unknown_server")
	field(1, `{"order_ref":"no number"}`, now, "invalid")
	field(1, "\x00\xff\xfegarbage{", now, "invalid")
	tp.add(1, `{"order_no":"1"}`, -1, now, "invalid")
	tp.recs[len(tp.recs)-1].Headers = []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte("0x1f")}}
	field(1, `{"order_no":`+strconv.FormatInt(tp.id(t, -time.Second, 1, 2, 5), 10)+`}`, now)
	// p2: a record an hour younger than its number, then a clean one.
	tp.add(2, `{}`, tp.id(t, -time.Hour, 1, 2, 0), now, "lag")
	c(2, -time.Second, 9)
	// p3: a number an hour ahead (the record's timestamp too, so no lag).
	c(3, -2*time.Second, 9)
	tp.add(3, `{}`, tp.id(t, time.Hour, 1, 2, 0), now.Add(time.Hour), "future")
	produceTo(t, e.Kafka, tp.recs...)

	rep := e.WaitOutput(t, 60*time.Second)
	pipetest.RequireExactlyOnce(t, rep)
	var stdout harness.SyncBuffer
	reg := prometheus.NewRegistry()
	run := startAuditor(t, e.Kafka.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{e.Out, third} }), Topic(auditTopic), setLoop(func(s *eos.Config) { s.Group = third + "-audit"; s.InstanceID = "a" }), AllowedServers(1), Stdout(&stdout), setLoop(func(s *eos.Config) { s.Registerer = reg }), func(c *cfg) { c.eos.LagEvery = 100 * time.Millisecond })
	total := int64(rep.Numbered + len(tp.recs))
	waitAudited(t, total, run)
	// Caught up, every partition lags by 0, the worker's 3 transactional
	// ones too (their last commit marker is consumed), in the metric and
	// on the live page.
	if !accounting.WaitFor(10*time.Second, func() bool { return lagSeries(run.a) == 7 && gaugeSum(run.a.m.lag) == 0 }) {
		t.Errorf("consumer lag: %d series summing to %v, want 7 partitions at 0", lagSeries(run.a), gaugeSum(run.a.m.lag))
	}
	if lag := run.a.live.summary(time.Now(), nil).ConsumerLag; lag != 0 {
		t.Errorf("live page consumer lag %d, want 0", lag)
	}

	got := readAudit(t, e.Kafka, auditTopic, 2)
	if int64(len(got)) != total {
		t.Fatalf("%d audit records for %d numbered records", len(got), total)
	}
	counts := map[string]int64{}
	for _, r := range tp.recs {
		loc := string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))
		a, ok := got[loc]
		if !ok {
			t.Fatalf("no audit record for %s", loc)
		}
		if !reflect.DeepEqual(a.Anomalies, tp.want[r]) {
			t.Errorf("%s (%q): anomalies %q, want %q", loc, r.Value, a.Anomalies, tp.want[r])
		}
		for _, k := range a.Anomalies {
			counts[k]++
		}
	}
	for loc, a := range got {
		if a.Topic == e.Out {
			if a.Anomalies != nil || !a.Valid || a.Server != 1 || a.Worker != 1 || !strings.HasPrefix(a.Source, e.Input+"/") {
				t.Errorf("worker output %s: %+v, want a clean record with its source", loc, a)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	run.stop(t)
	s := run.a.Stats()
	wantCounts := map[string]int64{"duplicate": 1, "renumbered": 0, "backwards": 1, "unknown_server": 1, "unknown_worker": 0, "future": 1, "lag": 1, "invalid": 3}
	if !reflect.DeepEqual(s.Anomalies, wantCounts) || !reflect.DeepEqual(counts, map[string]int64{"duplicate": 1, "backwards": 1, "unknown_server": 1, "future": 1, "lag": 1, "invalid": 3}) {
		t.Fatalf("anomaly counts: stats %v, audit topic %v, want %v", s.Anomalies, counts, wantCounts)
	}
	if s.Audited != total || s.Clean != total-8 {
		t.Fatalf("stats %+v, want %d audited, %d clean", s, total, total-8)
	}
	for k, n := range wantCounts {
		if m := counterValue(run.a.m.anomalies.WithLabelValues(k)); m != float64(n) {
			t.Errorf("flakestream_audit_anomalies_total{kind=%q} = %v, want %d", k, m, n)
		}
	}
	if m := counterValue(run.a.m.numbers.WithLabelValues("1", "1")); m != float64(rep.Numbered) {
		t.Errorf("flakestream_audit_numbers_total{server=1,worker=1} = %v, want %d", m, rep.Numbered)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]*dto.MetricFamily{}
	for _, f := range families {
		have[f.GetName()] = f
	}
	if h := have["flakestream_audit_lag_ms"]; h == nil || h.Metric[0].Histogram.GetSampleCount() != uint64(total-3) {
		t.Errorf("flakestream_audit_lag_ms: %v, want a sample for each of the %d valid numbers", h, total-3)
	}
	if h := have["flakestream_audit_sequence_per_ms"]; h == nil || h.Metric[0].Histogram.GetSampleCount() == 0 {
		t.Errorf("flakestream_audit_sequence_per_ms: %v, want samples", h)
	}
	for _, name := range []string{"flakestream_audit_consumer_lag", "flakestream_audit_dup_entries", "flakestream_audit_dup_evictions_total", "flakestream_audit_records_total"} {
		if have[name] == nil {
			t.Errorf("metric %s not registered", name)
		}
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if int64(len(lines)) != total {
		t.Fatalf("%d stdout lines, want %d", len(lines), total)
	}
	for _, l := range lines {
		if _, err := codec.ParseAuditRecord([]byte(l)); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
	}
}

// lagSeries counts the consumer lag gauge's partitions.
func lagSeries(a *Auditor) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { a.m.lag.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestAuditRefusesMissingTopic(t *testing.T) {
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 1)
	a, err := New(eos.Config{Brokers: k.Addrs, Topics: []string{topic}, TopicWait: eos.NoWait(300 * time.Millisecond)}, Topic(topic+".nope"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context()); !errors.Is(err, eos.ErrMissingTopic) {
		t.Fatalf("Run = %v, want eos.ErrMissingTopic naming the fix", err)
	}
}

func TestNewAuditorValidates(t *testing.T) {
	ok := eos.Config{Brokers: []string{"x"}, Topics: []string{"in"}}
	cases := []struct {
		name string
		s    eos.Config
		opts []Opt
		want error
	}{
		{"no brokers", eos.Config{Topics: []string{"in"}}, nil, eos.ErrNoBrokers},
		{"no input", eos.Config{Brokers: []string{"x"}}, nil, eos.ErrNoInput},
		{"audit topic is input", ok, []Opt{Topic("in")}, eos.ErrSameTopic},
		{"bad layout", ok, []Opt{Layout(idgen.Layout{TimeBits: 41})}, eos.ErrBadConfig},
		{"short window", ok, []Opt{DupWindow(time.Millisecond)}, eos.ErrBadConfig},
		{"no entries", ok, []Opt{DupMaxEntries(0)}, eos.ErrBadConfig},
		{"negative skew", ok, []Opt{MaxSkew(-time.Second)}, eos.ErrBadConfig},
		{"server outside the layout", ok, []Opt{AllowedServers(1, 32)}, eos.ErrBadConfig},
		{"worker outside the layout", ok, []Opt{AllowedWorkers(-1)}, eos.ErrBadConfig},
		{"empty field", ok, []Opt{NumberField("")}, eos.ErrBadConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(c.s, c.opts...); !errors.Is(err, c.want) {
				t.Fatalf("New = %v, want %v", err, c.want)
			}
		})
	}
	// A zero Group is the audit's own; a zero InstanceID the host name.
	s := ok
	s.InstanceID = "pod-3"
	a, err := New(s, Topic("in.audit"))
	if err != nil || a.TransactionalID() != "flakestream-flakestream-audit-pod-3" || a.cfg.dupWindow != 10*time.Minute {
		t.Fatalf("defaults: %v %q %s", err, a.TransactionalID(), a.cfg.dupWindow)
	}
	host, _ := os.Hostname()
	if a, err := New(ok, Topic("in.audit")); err != nil || a.TransactionalID() != "flakestream-flakestream-audit-"+host {
		t.Fatalf("default instance: %v %q, want the host name %q", err, a.TransactionalID(), host)
	}
}
