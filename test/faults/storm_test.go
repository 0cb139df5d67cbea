package faults_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The storm's topic limits: the output takes record batches of up to
// stormOut bytes, the DLQ up to stormDLQ, the worker reads values of up to
// harness.MaxRecordBytes (64 KiB).
const (
	stormRate = 1000
	stormOut  = 48 << 10
	stormDLQ  = 24 << 10
)

// A poison kind: how to make its record, and the class its dead letter
// must carry ("" for a record that must be numbered), and whether the dead
// letter must be a reference record.
type poison struct {
	name  string
	class codec.Class
	ref   bool
	// make returns bad record k, or false when it cannot be made yet (it
	// needs what the tail has seen): a good record is written in its place.
	make func(k int, tl *tail) (stormRec, bool)
}

// stormRec is one record of the storm: its key ("ORD-k" if nil), value,
// headers, and timestamp (now if zero).
type stormRec struct {
	key, value []byte
	headers    []kgo.RecordHeader
	ts         time.Time
}

func plain(f func(k int) []byte) func(k int, _ *tail) (stormRec, bool) {
	return func(k int, _ *tail) (stormRec, bool) { return stormRec{value: f(k)}, true }
}

// padded is a clean order of about n bytes.
func padded(k, n int) []byte {
	return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","pad":"` + strings.Repeat("x", n-40) + `"}`)
}

// notJSON is an unterminated order of about n bytes.
func notJSON(k, n int) []byte {
	return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","pad":"` + strings.Repeat("x", n-40))
}

// stormPoisons are the bad records of the JSON storm, every class the
// worker reads from a JSON record: each size boundary, malformed JSON and
// UTF-8, deep nesting, pre-filled numbers the worker must not believe, and
// another order's number under an order key that has its own.
func stormPoisons() []poison {
	layout := idgen.DefaultLayout()
	number := func(ms, server, seq int64) []byte {
		n, err := layout.Compose(ms, server, 1, seq%layout.PerMillisecond())
		if err != nil {
			panic(err)
		}
		return []byte(strconv.FormatInt(n, 10))
	}
	var ps []poison
	for _, k := range orders.BadKinds {
		if k == orders.TooLarge {
			continue // below, at the storm's sizes
		}
		ps = append(ps, poison{name: k.Class(), class: codec.Class(k.Class()), make: plain(func(i int) []byte { return orders.Event(i, k, 200, 0) })})
	}
	deep := func(k int) []byte {
		return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","deep":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`)
	}
	return append(ps,
		poison{name: "output over its topic's limit", class: codec.ClassOutputTooLarge, ref: true, make: plain(func(k int) []byte { return padded(k, stormOut+500) })},
		poison{name: "over --max-record-bytes", class: codec.ClassTooLarge, ref: true, make: plain(func(k int) []byte { return padded(k, harness.MaxRecordBytes+2000) })},
		poison{name: "dead letter under the DLQ's limit", class: codec.ClassNotJSON, make: plain(func(k int) []byte { return notJSON(k, stormDLQ-1000) })},
		poison{name: "dead letter over the DLQ's limit", class: codec.ClassNotJSON, ref: true, make: plain(func(k int) []byte { return notJSON(k, stormDLQ+500) })},
		poison{name: "10,000-deep nesting", class: inspectClass(deep(0)), make: plain(deep)},
		poison{name: "number of an unknown server", class: codec.ClassUnknownServer, make: plain(func(k int) []byte {
			return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","order_no":"` + string(number(time.Now().UnixMilli()-1000, 9, int64(k))) + `"}`)
		})},
		poison{name: "number from the future", class: codec.ClassFutureNumber, make: plain(func(k int) []byte {
			return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","order_no":"` + string(number(time.Now().Add(time.Hour).UnixMilli(), 1, int64(k))) + `"}`)
		})},
		// An order already numbered comes again, carrying the number of
		// another order: both numbers are the worker's own (allowed server
		// and worker, not ahead of the clock), so only the idempotency key
		// tells that the number is not this order's. The order is one
		// the tail has read numbered, so its key holds its number before
		// this copy is written.
		poison{name: "another order's number", class: codec.ClassKeyMismatch, make: func(k int, tl *tail) (stormRec, bool) {
			key, other, ok := tl.numberedPair()
			if !ok {
				return stormRec{}, false
			}
			return stormRec{key: key, value: []byte(`{"order_ref":"` + string(key) + `","order_no":"` + other + `"}`)}, true
		}},
		// A new order carrying another order's number: its key holds no
		// number yet, so only the number index
		// (--idempotency-number-index) tells that the number is taken.
		poison{name: "another order's number, a new key", class: codec.ClassNumberTaken, make: func(k int, tl *tail) (stormRec, bool) {
			_, other, ok := tl.numberedPair()
			if !ok {
				return stormRec{}, false
			}
			key := "NEW-" + strconv.Itoa(k)
			return stormRec{key: []byte(key), value: []byte(`{"order_ref":"` + key + `","order_no":"` + other + `"}`)}, true
		}},
	)
}

// stormRejected is the bad record a broker refuses alone: a clean order
// two days old, which the output topic refuses (INVALID_TIMESTAMP: its
// message.timestamp.before.max.ms is an hour) and the DLQ takes. The
// worker keeps an input record's timestamp, and learns no timestamp bound
// at start, so only the broker's refusal finds it. Each costs the batch
// two aborted attempts (refused in a record batch with others, then
// alone), so the storm writes three, not one in a hundred.
var stormRejected = poison{name: "refused by the broker (a timestamp two days old)", class: codec.ClassRejected,
	make: func(k int, _ *tail) (stormRec, bool) {
		return stormRec{value: orders.Event(k, orders.Clean, 200, 0), ts: time.Now().Add(-48 * time.Hour)}, true
	}}

// stormTimestampBound is the output topic's message.timestamp.before.max.ms
// in the storm: records older than an hour are refused.
const stormTimestampBound = "3600000"

// inspectClass is the class the workers' codec gives value ("" if it
// needs a number).
func inspectClass(value []byte) codec.Class {
	c, err := codec.New(codec.Config{MaxBytes: harness.MaxRecordBytes})
	if err != nil {
		panic(err)
	}
	in := c.Inspect(value)
	if in.Kind == codec.NeedsNumber {
		return ""
	}
	return in.Class()
}

// stormGood are the good records among the storm's: plain orders, one
// just under the output's limit, and one with forged flakestream-*
// headers, which the worker must not believe.
func stormGood(k int) stormRec {
	switch k % 100 {
	case 5:
		return stormRec{value: padded(k, stormOut-700)}
	case 15:
		return stormRec{value: orders.Event(k, orders.Clean, 200, 0), headers: []kgo.RecordHeader{
			{Key: codec.HeaderNumber, Value: []byte("1")}, {Key: codec.HeaderSource, Value: []byte("elsewhere/0/0")}}}
	}
	return stormRec{value: orders.Event(k, orders.Clean, 200, 0)}
}

// stormSeconds is how long the storm blows: $FLAKESTREAM_STORM_SECONDS,
// else 20 s on a real broker and 10 s on kfake.
func stormSeconds(t *testing.T, e *harness.Env) int {
	if v := os.Getenv("FLAKESTREAM_STORM_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FLAKESTREAM_STORM_SECONDS=%q: want a positive number of seconds", v)
		}
		return n
	}
	if e.Kafka.Real() {
		return 20
	}
	return 10
}

// stormEnv is an env whose output and DLQ take records of at most
// stormOut and stormDLQ bytes, and whose output refuses records more than
// an hour old.
func stormEnv(t *testing.T) *harness.Env {
	e := newEnv(t, 4, false)
	adm := e.Kafka.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set := func(topic string, kv ...string) {
		var cs []kadm.AlterConfig
		for i := 0; i < len(kv); i += 2 {
			cs = append(cs, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: &kv[i+1]})
		}
		rs, err := adm.AlterTopicConfigs(ctx, cs, topic)
		if err == nil {
			_, err = rs.On(topic, nil)
		}
		if err != nil {
			t.Fatalf("configure %s: %v", topic, err)
		}
	}
	set(e.Output, "max.message.bytes", strconv.Itoa(stormOut), "message.timestamp.before.max.ms", stormTimestampBound)
	set(e.DLQ, "max.message.bytes", strconv.Itoa(stormDLQ))
	return e
}

// TestFaultPoisonStorm: 1,000 orders a second, 10% of them bad in every
// way the tree knows, for $FLAKESTREAM_STORM_SECONDS, next to a clean run
// of the same orders at the same time. Every order must be numbered or
// dead-lettered exactly once, every bad one under its own class (and as a
// reference record where it would not fit the DLQ). The rows report the
// longest stall and the p99 latency from write to committed output; the
// clean run's p99 is the storm's baseline. The two run side by side, not
// one after the other, so that a shared machine's load, which moves the
// p99 more than the storm does, weighs on both alike.
//
// The orders carry an idempotency key (the record key), with the number
// index, so that an order that comes again with another order's number is
// dead-lettered key_mismatch, and a new order with another order's number
// number_taken. The output refuses records over an hour old, so that a
// two-day-old order is refused by the broker alone and dead-lettered
// rejected: the broker's check is one the worker does not make itself, and
// it touches no other record of the row (a null key to a compacted topic
// would too, but only with a compacted output, since a DLQ that refuses a
// dead letter stops the worker). kfake does not enforce the bound, so
// there the row has no rejected records.
//
// The Avro and Protobuf storms (storm_registry_test.go) follow: the
// worker reads one value format, so a registry-encoded storm is a worker
// and input of its own.
func TestFaultPoisonStorm(t *testing.T) {
	clean, e := stormEnv(t), stormEnv(t)
	secs := stormSeconds(t, clean)
	args := []string{"--idempotency-key", "key", "--idempotency-number-index"}
	var rare *poison
	if e.Kafka.Real() {
		rare = &stormRejected // kfake takes the topic setting but does not enforce it
	}
	var cleanLat, stormLat latencies
	rc := beginStorm(t, clean, "clean", "poison storm: clean run beside it (the p99 baseline)", secs, stormFlavor{good: stormGood, args: args}, &cleanLat)
	r := beginStorm(t, e, "storm", "poison storm: 10% bad records of every class", secs,
		stormFlavor{good: stormGood, poisons: stormPoisons(), rare: rare, args: args}, &stormLat)
	writeBoth(t, rc, r)
	bound := time.Duration(secs)*time.Second + 3*time.Minute
	rc.finish(bound)
	r.result.Extra["clean_p99_ms"], r.result.Extra["clean_p50_ms"] = cleanLat.p(99), cleanLat.p(50)
	r.result.Extra["clean_phases"] = rc.result.Extra["phases"]
	r.beforeRecord = func() {
		r.result.Extra["p99_ms"], r.result.Extra["p50_ms"] = stormLat.p(99), stormLat.p(50)
		if c := cleanLat.p(99); c > 0 {
			r.result.Extra["p99_ratio"] = float64(int(100*stormLat.p(99)/c)) / 100
		}
	}
	r.finish(bound)
	t.Logf("p99 %.0f ms (clean run %.0f ms), p50 %.0f ms (clean %.0f ms)", stormLat.p(99), cleanLat.p(99), stormLat.p(50), cleanLat.p(50))
	registryStorms(t, max(secs/3, 10))
}

// stormFlavor is what a storm writes and how its worker reads it.
type stormFlavor struct {
	format  codec.ValueFormat // "" for JSON
	good    func(k int) stormRec
	poisons []poison // every 10th record, in turn; none: a clean run
	rare    *poison  // if set, three records, at a quarter, half and three quarters of the run
	args    []string // worker flags
}

// stormRun is a run of the storm: the run, what it writes and its tail.
type stormRun struct {
	*run
	flavor stormFlavor
	n      int
	tail   *tail
	lat    *latencies
	cl     *kgo.Client // writes the storm
}

// beginStorm starts a worker for a storm of secs seconds, and its tail;
// writeBoth (or write) then writes it, and finish accounts for it. lat
// holds the latencies once the run is accounted for.
func beginStorm(t *testing.T, e *harness.Env, instance, fault string, secs int, f stormFlavor, lat *latencies) *stormRun {
	n := stormRate * secs
	setup := fmt.Sprintf("1 worker, 4 partitions; output max.message.bytes %d, message.timestamp.before.max.ms %s, DLQ %d; %d orders at %d/s",
		stormOut, stormTimestampBound, stormDLQ, n, stormRate)
	if len(f.poisons) > 0 {
		names := make([]string, len(f.poisons))
		for i, p := range f.poisons {
			names[i] = p.name
		}
		setup += "; every 10th bad, in turn: " + strings.Join(names, ", ")
	}
	if f.rare != nil {
		setup += "; 3 more: " + f.rare.name
	}
	metrics := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	r := begin(t, e, fault, setup, append([]string{"--allowed-servers", "1", "--allowed-workers", "1", "--http-addr", metrics}, f.args...)...)
	r.beforeStop = func() { r.result.Extra["phases"] = scrapePhases(t, metrics) }
	// Runs side by side share the test's log dir: each names its worker
	// and timeline.
	r.timeline = "timeline-" + instance + ".csv"
	r.p.start(instance)
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0))
	return &stormRun{run: r, flavor: f, n: n, tail: startTail(t, e), lat: lat, cl: cl}
}

// writeBoth writes the storms of rs at the same time.
func writeBoth(t *testing.T, rs ...*stormRun) {
	t.Helper()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, s := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.write() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// write writes the storm, notes the inputs, and makes the run's check
// account for every bad record it wrote.
func (s *stormRun) write() error {
	recs, sent, bad, err := writeStorm(s.e, s.cl, s.n, s.flavor, s.tail)
	if err != nil {
		return err
	}
	s.e.AddInputs(recs)
	want := map[string]poison{}
	for i, p := range bad {
		rec := recs[i]
		want[string(codec.AppendSource(nil, rec.Topic, rec.Partition, rec.Offset))] = p
	}
	s.also = func(rep accounting.Report) bool {
		*s.lat = s.tail.latencies(s.t, recs, sent)
		s.result.Extra["records_latency_measured"] = len(*s.lat)
		return checkStormDLQ(s.t, s.e, s.run, want)
	}
	return nil
}

// writeStorm writes n orders at stormRate a second, 10 every 10 ms, every
// 10th one bad (the poisons in turn) if there are poisons, and returns
// them with the time each was written and the poison of each bad one.
func writeStorm(e *harness.Env, cl *kgo.Client, n int, f stormFlavor, tl *tail) ([]*kgo.Record, []time.Time, map[int]poison, error) {
	recs := make([]*kgo.Record, n)
	sent := make([]time.Time, n)
	bad := map[int]poison{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n/stormRate)*time.Second+2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := range n {
		if i%10 == 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / stormRate)))
		}
		rec, ok := stormRec{}, false
		switch {
		case i%10 == 0 && len(f.poisons) > 0:
			p := f.poisons[(i/10)%len(f.poisons)]
			if rec, ok = p.make(i, tl); ok {
				bad[i] = p
			}
		case f.rare != nil && (i == n/4+5 || i == n/2+5 || i == 3*n/4+5):
			rec, ok = f.rare.make(i, tl)
			bad[i] = *f.rare
		}
		if !ok {
			rec = f.good(i)
		}
		if rec.key == nil {
			rec.key = []byte("ORD-" + strconv.Itoa(i))
		}
		if rec.ts.IsZero() {
			rec.ts = time.Now()
		}
		recs[i] = &kgo.Record{Topic: e.Input, Partition: int32(i) % e.Partitions, Key: rec.key, Value: rec.value,
			Headers: append([]kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}}, rec.headers...), Timestamp: rec.ts.Truncate(time.Millisecond)}
		sent[i] = time.Now()
		wg.Add(1)
		cl.Produce(ctx, recs[i], func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, nil, nil, fmt.Errorf("storm: write the orders: %w", firstErr)
	}
	return recs, sent, bad, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// checkStormDLQ checks that every bad record is in the DLQ under its class,
// as a reference record where it must be one, and records the classes.
func checkStormDLQ(t *testing.T, e *harness.Env, r *run, want map[string]poison) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dlq, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.DLQ)
	if err != nil {
		t.Errorf("read the DLQ: %v", err)
		return false
	}
	classes, ok := map[string]int{}, true
	seen := map[string]bool{}
	for _, d := range dlq {
		class, _ := accounting.Header(d, codec.HeaderErrorClass)
		_, ref := accounting.Header(d, codec.HeaderReference)
		if ref {
			class += " (reference)"
		}
		classes[class]++
		src, _ := accounting.Header(d, codec.HeaderSource)
		p, bad := want[src]
		seen[src] = true
		switch {
		case !bad:
			t.Errorf("%s dead-lettered as %s, but it was a good record", src, class)
			ok = false
		case string(p.class) != strings.TrimSuffix(class, " (reference)") || p.ref != ref:
			t.Errorf("%s (%s) dead-lettered as %s, want %s (reference %t)", src, p.name, class, p.class, p.ref)
			ok = false
		}
	}
	for src, p := range want {
		if !seen[src] && p.class != "" {
			t.Errorf("%s (%s) is not in the DLQ", src, p.name)
			ok = false
		}
	}
	r.result.Extra["dlq_classes"] = classes
	t.Logf("dead letters by class: %v", classes)
	return ok
}

// stormWarmUp is how long after the first order latencies start to
// count: the worker's join of its group is no part of either run.
const stormWarmUp = 3 * time.Second

// latencies are milliseconds from writing an order to reading its
// committed output or dead letter.
type latencies []float64

// p returns the q-th percentile (0 if empty).
func (l latencies) p(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(int(float64(len(s))*q/100), len(s)-1)]
}

// tail reads the output and the DLQ read_committed as the run goes and
// notes when each record's source first became visible.
type tail struct {
	mu     sync.Mutex
	seenAt map[string]time.Time
	// numbered are the key and number of the last two numbered records
	// read from the output, last[1] the newer.
	numbered [2]struct{ key, number string }
	stop     context.CancelFunc
	done     chan struct{}
}

func startTail(t *testing.T, e *harness.Env) *tail {
	cl := e.Kafka.Client(t, kgo.ConsumeTopics(e.Output, e.DLQ), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	tl := &tail{seenAt: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			tl.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if src, ok := accounting.Header(r, codec.HeaderSource); ok {
					if _, dup := tl.seenAt[src]; !dup {
						tl.seenAt[src] = now
					}
				}
				if n, ok := accounting.Header(r, codec.HeaderNumber); ok && r.Topic == e.Output && len(r.Key) > 0 {
					tl.numbered[0] = tl.numbered[1]
					tl.numbered[1].key, tl.numbered[1].number = string(r.Key), n
				}
			})
			tl.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-tl.done })
	return tl
}

// numberedPair returns the key of an order the tail has read numbered and
// the number of another, or false before it has read two.
func (tl *tail) numberedPair() (key []byte, otherNumber string, ok bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	a, b := tl.numbered[1], tl.numbered[0]
	if a.key == "" || b.key == "" || a.key == b.key || a.number == b.number {
		return nil, "", false
	}
	return []byte(a.key), b.number, true
}

// latencies stops the tail and returns the latency of every record it saw.
func (tl *tail) latencies(t *testing.T, recs []*kgo.Record, sent []time.Time) latencies {
	tl.stop()
	<-tl.done
	var out latencies
	for i, r := range recs {
		if sent[i].Sub(sent[0]) < stormWarmUp {
			continue
		}
		if at, ok := tl.seenAt[string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))]; ok {
			out = append(out, float64(at.Sub(sent[i]).Microseconds())/1000)
		}
	}
	t.Logf("latency over the %d records written after the first %s", len(out), stormWarmUp)
	return out
}

// scrapePhases reads the worker's transaction phase histogram
// (eos.PhaseMetricName) from its metrics listener at addr and returns, per
// phase, the committed transactions, their mean and their p99 (the upper
// bound of the bucket it falls in) in milliseconds; nil if it cannot. It
// shows where a transaction's time goes, for a p99 that moves.
func scrapePhases(t *testing.T, addr string) map[string]map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Logf("phases: %v", err)
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("phases: %v", err)
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil || fams[eos.PhaseMetricName] == nil {
		t.Logf("phases: %s: %v", eos.PhaseMetricName, err)
		return nil
	}
	out := map[string]map[string]float64{}
	var line []string
	for _, m := range fams[eos.PhaseMetricName].GetMetric() {
		var phase string
		for _, l := range m.GetLabel() {
			if l.GetName() == "phase" {
				phase = l.GetValue()
			}
		}
		h := m.GetHistogram()
		n := float64(h.GetSampleCount())
		if n == 0 {
			continue
		}
		p99 := math.Inf(1)
		for _, b := range h.GetBucket() {
			if float64(b.GetCumulativeCount()) >= 0.99*n {
				p99 = b.GetUpperBound()
				break
			}
		}
		round := func(s float64) float64 { return math.Round(s*1e4) / 10 }
		out[phase] = map[string]float64{"txns": n, "mean_ms": round(h.GetSampleSum() / n), "p99_ms": round(p99)}
		line = append(line, fmt.Sprintf("%s mean %.1f ms, p99 <= %.1f ms", phase, out[phase]["mean_ms"], out[phase]["p99_ms"]))
	}
	slices.Sort(line)
	t.Logf("transaction phases: %s", strings.Join(line, "; "))
	return out
}
