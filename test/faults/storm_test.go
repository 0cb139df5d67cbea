package faults_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
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

// A poison kind: how to make its value (and headers), and the class its
// dead letter must carry ("" for a record that must be numbered), and
// whether the dead letter must be a reference record.
type poison struct {
	name  string
	class codec.Class
	ref   bool
	make  func(k int) ([]byte, []kgo.RecordHeader)
}

func plain(f func(k int) []byte) func(k int) ([]byte, []kgo.RecordHeader) {
	return func(k int) ([]byte, []kgo.RecordHeader) { return f(k), nil }
}

// padded is a clean order of about n bytes.
func padded(k, n int) []byte {
	return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","pad":"` + strings.Repeat("x", n-40) + `"}`)
}

// notJSON is an unterminated order of about n bytes.
func notJSON(k, n int) []byte {
	return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","pad":"` + strings.Repeat("x", n-40))
}

// stormPoisons are the bad records of the storm, every class the worker
// reads from a JSON record: each size boundary, malformed JSON and UTF-8,
// deep nesting, pre-filled numbers the worker must not believe.
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
		// too_deep where the codec bounds nesting; numbered where it
		// does not.
		poison{name: "deep nesting", class: inspectClass(deep(0)), make: plain(deep)},
		poison{name: "number of an unknown server", class: codec.ClassUnknownServer, make: plain(func(k int) []byte {
			return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","order_no":"` + string(number(time.Now().UnixMilli()-1000, 9, int64(k))) + `"}`)
		})},
		poison{name: "number from the future", class: codec.ClassFutureNumber, make: plain(func(k int) []byte {
			return []byte(`{"order_ref":"ORD-` + strconv.Itoa(k) + `","order_no":"` + string(number(time.Now().Add(time.Hour).UnixMilli(), 1, int64(k))) + `"}`)
		})},
	)
}

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
func stormGood(k int) ([]byte, []kgo.RecordHeader) {
	switch k % 100 {
	case 5:
		return padded(k, stormOut-700), nil
	case 15:
		return orders.Event(k, orders.Clean, 200, 0), []kgo.RecordHeader{
			{Key: codec.HeaderNumber, Value: []byte("1")}, {Key: codec.HeaderSource, Value: []byte("elsewhere/0/0")}}
	}
	return orders.Event(k, orders.Clean, 200, 0), nil
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
// stormOut and stormDLQ bytes.
func stormEnv(t *testing.T) *harness.Env {
	e := newEnv(t, 4, false)
	adm := e.Kafka.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for topic, n := range map[string]int{e.Output: stormOut, e.DLQ: stormDLQ} {
		v := strconv.Itoa(n)
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &v}}, topic)
		if err == nil {
			_, err = rs.On(topic, nil)
		}
		if err != nil {
			t.Fatalf("set max.message.bytes of %s: %v", topic, err)
		}
	}
	return e
}

// TestFaultPoisonStorm: 1,000 orders a second, 10% of them bad in every
// way the tree knows, for $FLAKESTREAM_STORM_SECONDS. Every order must be
// numbered or dead-lettered exactly once, every bad one under its own
// class (and as a reference record where it would not fit the DLQ). The
// row reports the longest stall and the p99 latency from write to
// committed output, next to a clean run's of the same length.
func TestFaultPoisonStorm(t *testing.T) {
	clean := stormEnv(t)
	secs := stormSeconds(t, clean)
	cleanLat := runStorm(t, clean, "poison storm: clean run (the p99 baseline)", secs, nil)
	e := stormEnv(t)
	poisons := stormPoisons()
	var stormLat latencies
	r := beginStorm(t, e, "poison storm: 10% bad records of every class", secs, poisons, &stormLat)
	r.result.Extra["p99_ms"], r.result.Extra["clean_p99_ms"] = stormLat.p(99), cleanLat.p(99)
	r.result.Extra["p50_ms"], r.result.Extra["clean_p50_ms"] = stormLat.p(50), cleanLat.p(50)
	if c := cleanLat.p(99); c > 0 {
		r.result.Extra["p99_ratio"] = float64(int(100*stormLat.p(99)/c)) / 100
	}
	r.finish(time.Duration(secs)*time.Second + 3*time.Minute)
	t.Logf("p99 %.0f ms (clean run %.0f ms), p50 %.0f ms (clean %.0f ms)", stormLat.p(99), cleanLat.p(99), stormLat.p(50), cleanLat.p(50))
}

// runStorm runs a storm of secs seconds with poisons (none: a clean run)
// as its own row and returns its latencies.
func runStorm(t *testing.T, e *harness.Env, fault string, secs int, poisons []poison) latencies {
	var lat latencies
	r := beginStorm(t, e, fault, secs, poisons, &lat)
	r.finish(time.Duration(secs)*time.Second + 3*time.Minute)
	return lat
}

// beginStorm starts a worker, writes the storm, and returns the run,
// whose finish then accounts for it; lat holds the latencies once the
// storm is written and committed.
func beginStorm(t *testing.T, e *harness.Env, fault string, secs int, poisons []poison, lat *latencies) *run {
	n := stormRate * secs
	setup := fmt.Sprintf("1 worker, 4 partitions; output max.message.bytes %d, DLQ %d; %d orders at %d/s", stormOut, stormDLQ, n, stormRate)
	if len(poisons) > 0 {
		names := make([]string, len(poisons))
		for i, p := range poisons {
			names[i] = p.name
		}
		setup += "; every 10th bad, in turn: " + strings.Join(names, ", ")
	}
	r := begin(t, e, fault, setup, "--allowed-servers", "1", "--allowed-workers", "1")
	r.p.start("a")
	tail := startTail(t, e)
	recs, sent := writeStorm(t, e, n, poisons)
	e.AddInputs(recs)
	want := map[string]poison{}
	for i, rec := range recs {
		if i%10 == 0 && len(poisons) > 0 {
			want[string(codec.AppendSource(nil, rec.Topic, rec.Partition, rec.Offset))] = poisons[(i/10)%len(poisons)]
		}
	}
	r.also = func(rep accounting.Report) bool {
		*lat = tail.latencies(t, recs, sent)
		r.result.Extra["records_latency_measured"] = len(*lat)
		return checkStormDLQ(t, e, r, want)
	}
	return r
}

// writeStorm writes n orders at stormRate a second, 10 every 10 ms, every
// 10th one bad (the poisons in turn) if there are poisons, and returns
// them with the time each was written.
func writeStorm(t *testing.T, e *harness.Env, n int, poisons []poison) ([]*kgo.Record, []time.Time) {
	t.Helper()
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0))
	recs := make([]*kgo.Record, n)
	sent := make([]time.Time, n)
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
		var value []byte
		var hdrs []kgo.RecordHeader
		if i%10 == 0 && len(poisons) > 0 {
			value, hdrs = poisons[(i/10)%len(poisons)].make(i)
		} else {
			value, hdrs = stormGood(i)
		}
		recs[i] = &kgo.Record{Topic: e.Input, Partition: int32(i) % e.Partitions, Key: []byte("ORD-" + strconv.Itoa(i)),
			Value: value, Headers: append([]kgo.RecordHeader{{Key: "source-system", Value: []byte("shop-eu")}}, hdrs...),
			Timestamp: time.Now().Truncate(time.Millisecond)}
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
		t.Fatalf("storm: write the orders: %v", firstErr)
	}
	return recs, sent
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
	stop   context.CancelFunc
	done   chan struct{}
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
			})
			tl.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-tl.done })
	return tl
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
