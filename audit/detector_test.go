package audit

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testNow is the detector tests' clock: numbers are composed around it.
var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func mustCompose(t testing.TB, l idgen.Layout, at time.Time, server, worker, seq int64) int64 {
	t.Helper()
	id, err := l.Compose(at.UnixMilli(), server, worker, seq)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// numbered returns a record of topic t partition p at offset off carrying
// id in the number header (and no value), timestamped at the number's time
// unless ts is set.
func numbered(p int32, off int64, id int64) *kgo.Record {
	l := idgen.DefaultLayout()
	parts, _ := l.Decompose(id)
	return &kgo.Record{Topic: "t", Partition: p, Offset: off, Timestamp: parts.Time,
		Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte(strconv.FormatInt(id, 10))}}}
}

func newTestDetector(t testing.TB, mod func(*detectorConfig)) *detector {
	t.Helper()
	c := detectorConfig{layout: idgen.DefaultLayout(), field: codec.DefaultField, window: 10 * time.Minute,
		maxEntries: 1 << 20, maxSkew: 5 * time.Second, maxLag: 5 * time.Minute, now: func() time.Time { return testNow }}
	if mod != nil {
		mod(&c)
	}
	return newDetector(c)
}

// auditAll runs recs through one committed batch and returns each record's
// anomaly names.
func auditAll(d *detector, recs ...*kgo.Record) [][]string {
	d.begin()
	var out [][]string
	for _, r := range recs {
		rec, _, skip := d.audit(r)
		if skip {
			out = append(out, []string{"SKIPPED"})
			continue
		}
		out = append(out, rec.Anomalies)
	}
	d.commit()
	return out
}

func TestDetectorAnomalies(t *testing.T) {
	l := idgen.DefaultLayout()
	at := func(d time.Duration, seq int64) int64 { return mustCompose(t, l, testNow.Add(d), 1, 1, seq) }
	withTS := func(r *kgo.Record, ts time.Time) *kgo.Record { r.Timestamp = ts; return r }
	value := func(p int32, off int64, v string, hdrs ...string) *kgo.Record {
		r := &kgo.Record{Topic: "t", Partition: p, Offset: off, Value: []byte(v), Timestamp: testNow}
		for i := 0; i+1 < len(hdrs); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: hdrs[i], Value: []byte(hdrs[i+1])})
		}
		return r
	}
	n := func(id int64) string { return strconv.FormatInt(id, 10) }
	allowOne := func(c *detectorConfig) {
		c.servers = map[int64]struct{}{1: {}}
		c.workers = map[int64]struct{}{1: {}}
	}
	cases := []struct {
		name string
		mod  func(*detectorConfig)
		recs []*kgo.Record
		want [][]string
	}{
		{"clean increasing", nil,
			[]*kgo.Record{numbered(0, 0, at(-3*time.Second, 0)), numbered(0, 1, at(-3*time.Second, 1)), numbered(1, 0, at(-time.Second, 0))},
			[][]string{nil, nil, nil}},
		{"duplicate in another partition", nil,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 0)), numbered(1, 0, at(-time.Second, 0))},
			[][]string{nil, {"duplicate"}}},
		{"duplicate twice in a row is not backwards", nil,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 7)), numbered(0, 1, at(-time.Second, 7))},
			[][]string{nil, {"duplicate"}}},
		{"backwards in one partition only", nil,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 5)), numbered(0, 1, at(-time.Second, 4)), numbered(1, 0, at(-time.Second, 3))},
			[][]string{nil, {"backwards"}, nil}},
		{"backwards and duplicate", nil,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 1)), numbered(0, 1, at(-time.Second, 2)), numbered(0, 2, at(-time.Second, 1))},
			[][]string{nil, nil, {"duplicate", "backwards"}}},
		{"an invalid record in between keeps the last number", nil,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 9)), value(0, 1, `{}`), numbered(0, 2, at(-time.Second, 8))},
			[][]string{nil, {"invalid"}, {"backwards"}}},
		{"unknown server and worker", allowOne,
			[]*kgo.Record{numbered(0, 0, at(-time.Second, 0)), numbered(0, 1, mustCompose(t, l, testNow, 7, 1, 0)),
				numbered(0, 2, mustCompose(t, l, testNow.Add(time.Millisecond), 1, 9, 0)), numbered(0, 3, mustCompose(t, l, testNow.Add(2*time.Millisecond), 3, 4, 0))},
			[][]string{nil, {"unknown_server"}, {"unknown_worker"}, {"unknown_server", "unknown_worker"}}},
		{"any server without a list", nil,
			[]*kgo.Record{numbered(0, 0, mustCompose(t, l, testNow, 31, 31, 0))},
			[][]string{nil}},
		{"future beyond the skew only", nil,
			[]*kgo.Record{numbered(0, 0, at(4*time.Second, 0)), numbered(1, 0, at(6*time.Second, 0))},
			[][]string{nil, {"future"}}},
		{"lag both ways", nil,
			[]*kgo.Record{withTS(numbered(0, 0, at(-time.Hour, 0)), testNow), withTS(numbered(1, 0, at(-time.Second, 0)), testNow.Add(-time.Hour)),
				withTS(numbered(2, 0, at(-time.Minute, 0)), testNow)},
			[][]string{{"lag"}, {"lag"}, nil}},
		{"lag check off", func(c *detectorConfig) { c.maxLag = 0 },
			[]*kgo.Record{withTS(numbered(0, 0, at(-time.Hour, 0)), testNow)},
			[][]string{nil}},
		{"invalid: missing, garbage, bad numbers", nil,
			[]*kgo.Record{value(0, 0, `{"order_ref":"x"}`), value(0, 1, "\xff\x00garbage"), value(0, 2, `{"order_no":null}`),
				value(0, 3, `{"order_no":"007"}`), value(0, 4, `{"order_no":-5}`), value(0, 5, `{"order_no":"1.5"}`),
				value(0, 6, `{"order_no":"99999999999999999999"}`), value(0, 7, `{"order_no":"1","order_no":"2"}`), value(0, 8, ``)},
			[][]string{{"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}, {"invalid"}}},
		{"number field as string or integer", nil,
			[]*kgo.Record{value(0, 0, `{"order_no":"`+n(at(-time.Second, 0))+`"}`), value(0, 1, `{"a":[1],"order_no":`+n(at(-time.Second, 1))+`}`)},
			[][]string{nil, nil}},
		{"a bad header does not fall back to the field", nil,
			[]*kgo.Record{value(0, 0, `{"order_no":"`+n(at(-time.Second, 0))+`"}`, codec.HeaderNumber, "12a"),
				value(0, 1, `garbage`, codec.HeaderNumber, n(at(-time.Second, 1)))},
			[][]string{{"invalid"}, nil}},
		{"the last number header counts", nil,
			[]*kgo.Record{value(0, 0, ``, codec.HeaderNumber, "junk", codec.HeaderNumber, n(at(-time.Second, 0)))},
			[][]string{nil}},
		{"custom field", func(c *detectorConfig) { c.field = "id" },
			[]*kgo.Record{value(0, 0, `{"id":"`+n(at(-time.Second, 0))+`"}`), value(0, 1, `{"order_no":"`+n(at(-time.Second, 1))+`"}`)},
			[][]string{nil, {"invalid"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := auditAll(newTestDetector(t, c.mod), c.recs...)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("anomalies %q, want %q", got, c.want)
			}
		})
	}
}

// The audit record holds the decoded parts, the lag and the source.
func TestDetectorRecordFields(t *testing.T) {
	l := idgen.DefaultLayout()
	id := mustCompose(t, l, testNow, 3, 4, 5)
	r := numbered(2, 41, id)
	r.Timestamp = testNow.Add(-250 * time.Millisecond)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: codec.HeaderSource, Value: []byte("orders/2/17")})
	d := newTestDetector(t, nil)
	d.begin()
	rec, set, _ := d.audit(r)
	want := codec.AuditRecord{Decoded: codec.Decoded{ID: id, UnixMs: testNow.UnixMilli(), ElapsedMs: testNow.UnixMilli() - l.EpochMs(),
		Server: 3, Worker: 4, Sequence: 5, Valid: true}, Topic: "t", Partition: 2, Offset: 41,
		RecordUnixMs: testNow.UnixMilli() - 250, LagMs: -250, Source: "orders/2/17", Anomalies: []string{}}
	if set != 0 || len(rec.Anomalies) != 0 {
		t.Fatalf("anomalies %v", rec.Anomalies)
	}
	rec.Anomalies = []string{}
	if !reflect.DeepEqual(rec, want) {
		t.Fatalf("record\n%+v, want\n%+v", rec, want)
	}
	r.Headers[1].Value = []byte("not a source")
	if rec, _, _ := d.audit(r); rec.Source != "" {
		t.Fatalf("source %q from a malformed header, want empty", rec.Source)
	}
}

// The property exactly-once rests on: an aborted batch leaves no trace, so
// its records, read again, are not duplicates (or backwards steps) of
// themselves; a committed one does.
func TestDetectorAbortLeavesNoTrace(t *testing.T) {
	l := idgen.DefaultLayout()
	var recs []*kgo.Record
	for i := range int64(5) {
		recs = append(recs, numbered(0, i, mustCompose(t, l, testNow, 1, 1, i)))
	}
	d := newTestDetector(t, nil)
	d.begin()
	for _, r := range recs {
		d.audit(r)
	}
	d.abort()
	for _, got := range auditAll(d, recs...) {
		if got != nil {
			t.Fatalf("after an abort the same records were flagged %v", got)
		}
	}
	// Committed, the same number again is a duplicate.
	got := auditAll(d, numbered(1, 0, mustCompose(t, l, testNow, 1, 1, 4)))
	if !reflect.DeepEqual(got, [][]string{{"duplicate"}}) {
		t.Fatalf("after a commit the same number was flagged %v, want duplicate", got)
	}
	if d.dups.entries != 5 {
		t.Fatalf("window holds %d numbers, want 5", d.dups.entries)
	}
}

// At least once (no audit topic): records this instance already wrote are
// skipped when they come again, not judged as duplicates of themselves.
func TestDetectorSkipsRedelivered(t *testing.T) {
	l := idgen.DefaultLayout()
	d := newTestDetector(t, func(c *detectorConfig) { c.skipRedelivered = true })
	a, b := numbered(0, 10, mustCompose(t, l, testNow, 1, 1, 0)), numbered(0, 11, mustCompose(t, l, testNow, 1, 1, 1))
	auditAll(d, a, b)
	got := auditAll(d, a, b, numbered(0, 12, mustCompose(t, l, testNow, 1, 1, 2)))
	if !reflect.DeepEqual(got, [][]string{{"SKIPPED"}, {"SKIPPED"}, nil}) {
		t.Fatalf("redelivered records: %q", got)
	}
}

// Catch-up: observed records count for later checks but are not judged.
func TestDetectorObserve(t *testing.T) {
	l := idgen.DefaultLayout()
	d := newTestDetector(t, nil)
	x, y := mustCompose(t, l, testNow, 1, 1, 1), mustCompose(t, l, testNow, 1, 1, 9)
	d.observe(numbered(0, 0, x), testNow)
	d.observe(numbered(0, 1, y), testNow)
	got := auditAll(d, numbered(0, 2, mustCompose(t, l, testNow, 1, 1, 5)), numbered(1, 0, x))
	if !reflect.DeepEqual(got, [][]string{{"backwards"}, {"duplicate"}}) {
		t.Fatalf("after catch-up: %q, want backwards then duplicate", got)
	}
}

// FuzzDetector feeds arbitrary values and headers through the detector.
// Invariants, for any bytes:
//   - audit never panics, and every record gets an audit record;
//   - a record without a decodable number is flagged exactly ["invalid"],
//     and one with a number never "invalid";
//   - anomalies are listed in AnomalyKinds order, each at most once;
//   - the same record (same source, same number) twice is never renumbered;
//   - a valid number's parts compose back to it under the layout;
//   - the JSON parses back (codec.ParseAuditRecord) to the same record.
func FuzzDetector(f *testing.F) {
	l := idgen.DefaultLayout()
	id := mustCompose(f, l, testNow, 1, 1, 0)
	f.Add([]byte(`{"order_no":"`+strconv.FormatInt(id, 10)+`"}`), []byte(nil), []byte("orders/0/1"), int64(0), int32(0))
	f.Add([]byte("\xff\xfe"), []byte(strconv.FormatInt(id, 10)), []byte("/0/1"), int64(-1), int32(3))
	f.Add([]byte(`{"order_no":9223372036854775807}`), []byte("9223372036854775808"), []byte("a/b/c"), int64(1<<62), int32(-1))
	f.Add([]byte(`{"order_no":0}`), []byte("0"), []byte(""), int64(0), int32(0))
	f.Fuzz(func(t *testing.T, value, number, source []byte, tsMs int64, partition int32) {
		d := newTestDetector(t, func(c *detectorConfig) {
			c.servers = map[int64]struct{}{1: {}}
			c.maxEntries = 64
		})
		r := &kgo.Record{Topic: "t", Partition: partition, Offset: 5, Value: value, Timestamp: time.UnixMilli(tsMs % (1 << 50))}
		if number != nil {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: codec.HeaderNumber, Value: number})
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: codec.HeaderSource, Value: source})
		for round := range 2 { // the second time, the number is a duplicate
			d.begin()
			rec, set, skip := d.audit(r)
			d.commit()
			if skip {
				t.Fatal("skipped without at-least-once mode")
			}
			if !rec.Valid && !slices.Equal(rec.Anomalies, []string{"invalid"}) || rec.Valid && slices.Contains(rec.Anomalies, "invalid") {
				t.Fatalf("valid %v with anomalies %v", rec.Valid, rec.Anomalies)
			}
			if rec.Valid && round == 1 && set&anDuplicate == 0 && d.unchecked == 0 {
				t.Fatalf("the same number twice was not a duplicate: %v", rec.Anomalies)
			}
			if set&anRenumbered != 0 || rec.FirstCopy != nil {
				t.Fatalf("the same record twice, same number, was renumbered: %v %+v", rec.Anomalies, rec.FirstCopy)
			}
			last := -1
			for _, a := range rec.Anomalies {
				i := slices.Index(anomalyKinds[:], a)
				if i <= last {
					t.Fatalf("anomalies out of order or repeated: %v", rec.Anomalies)
				}
				last = i
			}
			if rec.Valid {
				if back, err := l.Compose(rec.UnixMs, rec.Server, rec.Worker, rec.Sequence); err != nil || back != rec.ID {
					t.Fatalf("parts of %d compose to %d (%v)", rec.ID, back, err)
				}
			}
			js := rec.AppendJSON(nil)
			back, err := codec.ParseAuditRecord(js)
			if err != nil {
				t.Fatalf("audit record %s does not parse: %v", js, err)
			}
			if len(rec.Anomalies) == 0 {
				rec.Anomalies = nil
			}
			if !reflect.DeepEqual(back, rec) {
				t.Fatalf("round trip\n%+v\n%+v", back, rec)
			}
		}
	})
}

// BenchmarkAuditBatch is the auditor's CPU per record without Kafka: find
// the number (in the header), decode it, judge it against the dup window
// and its partition, write the audit record's key and JSON, and update the
// metrics and the live page, in batches of 10,000 records over 4
// partitions.
func BenchmarkAuditBatch(b *testing.B) {
	a, err := New(eos.Config{Brokers: []string{"x"}, Topics: []string{"t"}, InstanceID: "b"}, Topic("t.audit"))
	if err != nil {
		b.Fatal(err)
	}
	l := idgen.DefaultLayout()
	const n = 10000
	batch := &a.b
	batch.in = make([]*kgo.Record, n)
	start := time.Now().Add(-time.Minute)
	round := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range batch.in {
			// 10 numbers per ms, new ones every round.
			id := mustCompose(b, l, start.Add(time.Duration(round*n+i)/10*time.Millisecond), 1, 1, int64(i%10))
			batch.in[i] = &kgo.Record{Topic: "t", Partition: int32(i % 4), Offset: int64(round*n + i), Timestamp: start, Value: []byte(`{}`),
				Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: strconv.AppendInt(nil, id, 10)},
					{Key: codec.HeaderSource, Value: codec.AppendSource(nil, "orders", int32(i%4), int64(round*n+i))}}}
		}
		round++
		b.StartTimer()
		a.det.begin()
		batch.build(a.det, "t.audit", 4)
		if err := a.Committed(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// sourced returns numbered(p, off, id) from source src, with the extra
// headers given as name, value pairs.
func sourced(p int32, off int64, id int64, src string, hdrs ...string) *kgo.Record {
	r := numbered(p, off, id)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: codec.HeaderSource, Value: []byte(src)})
	for i := 0; i+1 < len(hdrs); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: hdrs[i], Value: []byte(hdrs[i+1])})
	}
	return r
}

// renumbered: an order seen again with another number, by its source or
// (with a key) by its key; the same number again is a duplicate only.
func TestDetectorRenumbered(t *testing.T) {
	l := idgen.DefaultLayout()
	at := func(d time.Duration, seq int64) int64 { return mustCompose(t, l, testNow.Add(d), 1, 1, seq) }
	byHeader := func(c *detectorConfig) {
		spec := pipelineKey(t, "header:ref")
		c.keyOf = func(r *kgo.Record) ([]byte, bool) {
			k, err := spec.Key(t.Context(), codec.JSONFormat{}, r)
			return k, err == nil
		}
	}
	cases := []struct {
		name string
		mod  func(*detectorConfig)
		recs []*kgo.Record
		want [][]string
	}{
		{"clean: one number per source", nil,
			[]*kgo.Record{sourced(0, 0, at(-time.Second, 0), "in/0/0"), sourced(0, 1, at(-time.Second, 1), "in/0/1"), sourced(1, 0, at(-time.Second, 2), "in/1/0")},
			[][]string{nil, nil, nil}},
		{"renumbered: same source, another number", nil,
			[]*kgo.Record{sourced(0, 0, at(-2*time.Second, 0), "in/0/7"), sourced(1, 0, at(-time.Second, 0), "in/0/7")},
			[][]string{nil, {"renumbered"}}},
		{"copied: same source, same number, is a duplicate only", nil,
			[]*kgo.Record{sourced(0, 0, at(-time.Second, 0), "in/0/7"), sourced(1, 0, at(-time.Second, 0), "in/0/7")},
			[][]string{nil, {"duplicate"}}},
		{"the first copy stays the reference", nil,
			[]*kgo.Record{sourced(0, 0, at(-3*time.Second, 0), "in/0/7"), sourced(1, 0, at(-2*time.Second, 0), "in/0/7"),
				sourced(1, 1, at(-2*time.Second, 0), "in/0/7"), sourced(1, 2, at(-3*time.Second, 0), "in/0/7")},
			[][]string{nil, {"renumbered"}, {"duplicate", "renumbered"}, {"duplicate", "backwards"}}},
		{"no source, or a malformed one: not checked", nil,
			[]*kgo.Record{numbered(0, 0, at(-2*time.Second, 0)), numbered(0, 1, at(-time.Second, 0)),
				sourced(1, 0, at(-2*time.Second, 1), "garbage"), sourced(1, 1, at(-time.Second, 1), "garbage")},
			[][]string{nil, nil, nil, nil}},
		{"without --key, another source with the same key is clean", nil,
			[]*kgo.Record{sourced(0, 0, at(-2*time.Second, 0), "in/0/1", "ref", "R-1"), sourced(0, 1, at(-time.Second, 0), "in/0/2", "ref", "R-1")},
			[][]string{nil, nil}},
		{"with --key, the same key with another number is renumbered", byHeader,
			[]*kgo.Record{sourced(0, 0, at(-2*time.Second, 0), "in/0/1", "ref", "R-1"), sourced(0, 1, at(-time.Second, 0), "in/0/2", "ref", "R-1"),
				sourced(0, 2, at(-time.Second, 1), "in/0/3", "ref", "R-2"), sourced(0, 3, at(-time.Second, 2), "in/0/4")},
			[][]string{nil, {"renumbered"}, nil, nil}},
		{"with --key, the same key and number (an idempotent repeat) is a duplicate only", byHeader,
			[]*kgo.Record{sourced(0, 0, at(-time.Second, 0), "in/0/1", "ref", "R-1"), sourced(0, 1, at(-time.Second, 0), "in/0/2", "ref", "R-1")},
			[][]string{nil, {"duplicate"}}},
		{"a source never matches a key", byHeader,
			[]*kgo.Record{sourced(0, 0, at(-2*time.Second, 0), "in/0/1", "ref", "in/0/9"), sourced(0, 1, at(-time.Second, 0), "in/0/9", "ref", "R-2")},
			[][]string{nil, nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// One batch, and one batch per record: staged and committed
			// state must judge alike.
			if got := auditAll(newTestDetector(t, c.mod), c.recs...); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("in one batch: anomalies %q, want %q", got, c.want)
			}
			d := newTestDetector(t, c.mod)
			var got [][]string
			for _, r := range c.recs {
				got = append(got, auditAll(d, r)...)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("a batch each: anomalies %q, want %q", got, c.want)
			}
		})
	}
}

func pipelineKey(t *testing.T, s string) pipeline.KeySpec {
	t.Helper()
	k, err := pipeline.ParseKeySpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The renumbered record names its first copy: topic, partition, offset
// and number, in the audit record and its JSON.
func TestDetectorRenumberedNamesFirstCopy(t *testing.T) {
	l := idgen.DefaultLayout()
	first, second := mustCompose(t, l, testNow.Add(-time.Minute), 1, 1, 3), mustCompose(t, l, testNow, 1, 1, 0)
	d := newTestDetector(t, nil)
	a := sourced(2, 41, first, "orders/1/17")
	a.Topic = "out"
	auditAll(d, a)
	d.begin()
	rec, set, _ := d.audit(sourced(0, 9, second, "orders/1/17"))
	d.commit()
	want := &codec.Copy{Topic: "out", Partition: 2, Offset: 41, ID: first}
	if set != anRenumbered || !reflect.DeepEqual(rec.FirstCopy, want) {
		t.Fatalf("set %v first copy %+v, want renumbered and %+v", rec.Anomalies, rec.FirstCopy, want)
	}
	back, err := codec.ParseAuditRecord(rec.AppendJSON(nil))
	if err != nil || !reflect.DeepEqual(back.FirstCopy, want) {
		t.Fatalf("JSON %s: %+v, %v", rec.AppendJSON(nil), back.FirstCopy, err)
	}
	// A clean record names none.
	d.begin()
	if rec, _, _ := d.audit(sourced(0, 10, mustCompose(t, l, testNow, 1, 1, 1), "orders/1/18")); rec.FirstCopy != nil {
		t.Fatalf("clean record names a first copy %+v", rec.FirstCopy)
	}
}

// An aborted batch leaves no order behind; observed (catch-up) records do.
func TestDetectorRenumberedAbortAndObserve(t *testing.T) {
	l := idgen.DefaultLayout()
	x, y := mustCompose(t, l, testNow, 1, 1, 1), mustCompose(t, l, testNow, 1, 1, 2)
	d := newTestDetector(t, nil)
	d.begin()
	d.audit(sourced(0, 0, x, "in/0/1"))
	d.abort()
	if len(d.orders.m) != 0 || d.orders.entries != 0 {
		t.Fatalf("after an abort the order window holds %d (%d counted)", len(d.orders.m), d.orders.entries)
	}
	if got := auditAll(d, sourced(0, 0, y, "in/0/1")); got[0] != nil {
		t.Fatalf("after an abort, the order was flagged %v", got[0])
	}
	d2 := newTestDetector(t, nil)
	d2.observe(sourced(0, 0, x, "in/0/5"), testNow)
	if got := auditAll(d2, sourced(0, 1, y, "in/0/5")); !reflect.DeepEqual(got, [][]string{{"renumbered"}}) {
		t.Fatalf("after catch-up: %q, want renumbered", got)
	}
}

// The order window forgets an order a window of number time after its
// first copy, and past its cap evicts the oldest bucket: the copy that
// comes back later is no longer flagged.
func TestDetectorRenumberedWindow(t *testing.T) {
	l := idgen.DefaultLayout()
	d := newTestDetector(t, func(c *detectorConfig) { c.window = time.Minute })
	auditAll(d, sourced(0, 0, mustCompose(t, l, testNow.Add(-3*time.Minute), 1, 1, 0), "in/0/1"))
	// A newer number moves the window past it.
	auditAll(d, sourced(0, 1, mustCompose(t, l, testNow.Add(-time.Second), 1, 1, 0), "in/0/2"))
	if d.orders.entries != 1 {
		t.Fatalf("%d orders held, want 1 (the old one expired)", d.orders.entries)
	}
	if got := auditAll(d, sourced(0, 2, mustCompose(t, l, testNow, 1, 1, 0), "in/0/1")); got[0] != nil {
		t.Fatalf("an order a window old was flagged %v", got[0])
	}

	// Cap 10: the first second's orders are evicted by the next second's.
	d = newTestDetector(t, func(c *detectorConfig) { c.maxEntries = 10 })
	for i := range int64(8) {
		auditAll(d, sourced(0, i, mustCompose(t, l, testNow.Add(-30*time.Second), 1, 1, i), "in/0/"+strconv.FormatInt(i, 10)))
	}
	for i := range int64(8) {
		auditAll(d, sourced(0, 8+i, mustCompose(t, l, testNow.Add(-10*time.Second), 1, 1, i), "in/1/"+strconv.FormatInt(i, 10)))
	}
	if d.orders.entries > 10 || d.orders.evictions != 1 {
		t.Fatalf("%d orders, %d evictions: want at most 10 and 1", d.orders.entries, d.orders.evictions)
	}
	if got := auditAll(d, sourced(0, 20, mustCompose(t, l, testNow, 1, 1, 0), "in/0/3")); got[0] != nil {
		t.Fatalf("an evicted order was flagged %v", got[0])
	}
	if got := auditAll(d, sourced(0, 21, mustCompose(t, l, testNow, 1, 1, 1), "in/1/3")); !reflect.DeepEqual(got[0], []string{"renumbered"}) {
		t.Fatalf("a kept order came back with another number: %v, want renumbered", got[0])
	}
}

// Two names with the same 64-bit hash but different checks are two
// orders: the second is neither flagged against the first nor written over
// it (it goes unchecked), and the window's count stays right.
func TestDetectorOrderHashCollision(t *testing.T) {
	l := idgen.DefaultLayout()
	d := newTestDetector(t, nil)
	n := d.orders.sourceName("in/0/1")
	other := orderName{n.hash, n.check ^ 1}
	if !d.orders.add(other, orderEntry{id: mustCompose(t, l, testNow, 1, 1, 0), part: d.orders.part(partKey{"t", 0})}, 1<<62) {
		t.Fatal("the first name was not remembered")
	}
	for i := range int64(2) {
		if got := auditAll(d, sourced(0, 1+i, mustCompose(t, l, testNow, 1, 1, 1+i), "in/0/1")); got[0] != nil {
			t.Fatalf("a name sharing another's hash was flagged %v", got[0])
		}
	}
	if _, found, taken := d.orders.lookup(other); !found || !taken || d.orders.entries != 1 || len(d.orders.m) != 1 {
		t.Fatalf("the first name found %v taken %v; %d entries, %d in the map: want it alone", found, taken, d.orders.entries, len(d.orders.m))
	}
}
