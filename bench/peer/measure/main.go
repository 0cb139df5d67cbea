// Command measure is the Go half of scripts/peer-bench, which runs
// flakestream and its Kafka Streams peer (bench/peer/kstreams) side by side on
// one broker: it fills the backlog, creates and deletes the topics,
// watches a worker in another process drain the backlog (its group's
// committed offsets, its and the broker's CPU time from /proc, its peak
// RSS), checks what the worker wrote, and measures its latency at a fixed
// input rate with the bench's own machinery (bench.ExternalLatency).
//
//	measure topics  -brokers B -partitions N -create T1,T2 | -delete T1,T2
//	measure fill    -brokers B -topic T -count N [-record-bytes 200]
//	measure watch   -brokers B -topic T -group G -pid P -broker-pid Q [-redis-pid R]
//	                [-pprof http://H:P -cpu-profile F -profile-seconds 5] [-metrics http://H:P] [-metrics-out F]
//	measure check   -brokers B -topic T -expect numbered|copy
//	measure latency -brokers B -input T -output O [-rate 1000 -duration 15s]
//
// Every command prints one JSON object on stdout and is bounded by
// -timeout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/bench"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure topics|fill|watch|check|latency [flags] (-h for each)")
		os.Exit(2)
	}
	cmds := map[string]func(context.Context, []string) (any, error){
		"topics": topics, "fill": fill, "watch": watch, "check": check, "latency": latency,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "measure: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	out, err := run(context.Background(), os.Args[2:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "measure %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

// common are the flags every command has.
type common struct {
	brokers string
	timeout time.Duration
}

func (c *common) flags(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "Kafka bootstrap servers, comma-separated")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up after this long")
}

func (c *common) start(ctx context.Context) (context.Context, context.CancelFunc, *kgo.Client, error) {
	if c.timeout <= 0 {
		return nil, nil, nil, errors.New("-timeout must be positive")
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("timed out after %s", c.timeout))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, cl, nil
}

func (c *common) seeds() []string { return strings.Split(c.brokers, ",") }

func topics(ctx context.Context, args []string) (any, error) {
	var c common
	var create, del string
	var parts int
	fs := flag.NewFlagSet("topics", flag.ContinueOnError)
	c.flags(fs, time.Minute)
	fs.StringVar(&create, "create", "", "topics to create, comma-separated")
	fs.StringVar(&del, "delete", "", "topics to delete, comma-separated (missing ones are no error)")
	fs.IntVar(&parts, "partitions", 4, "partitions of each created topic")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel, cl, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if create != "" {
		rs, err := adm.CreateTopics(ctx, int32(parts), 1, nil, strings.Split(create, ",")...)
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		for _, r := range rs.Sorted() {
			if r.Err != nil {
				return nil, fmt.Errorf("create %s: %w", r.Topic, r.Err)
			}
		}
	}
	if del != "" {
		if _, err := adm.DeleteTopics(ctx, strings.Split(del, ",")...); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
	}
	return map[string]string{"created": create, "deleted": del}, nil
}

func fill(ctx context.Context, args []string) (any, error) {
	var c common
	var topic string
	var count, size int
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	c.flags(fs, 10*time.Minute)
	fs.StringVar(&topic, "topic", "", "topic to fill (must exist)")
	fs.IntVar(&count, "count", 1000000, "orders to produce")
	fs.IntVar(&size, "record-bytes", 200, "size of each order event (the bench's orders.Event)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("timed out after %s", c.timeout))
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// A pool of distinct events, as the bench's feed uses.
	pool := make([][]byte, 4096)
	for i := range pool {
		pool[i] = orders.Event(i, orders.Clean, size, 0)
	}
	start := time.Now()
	errc := make(chan error, 1)
	for i := 0; i < count; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: pool[i%len(pool)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, context.Cause(ctx)
	}
	select {
	case err := <-errc:
		return nil, fmt.Errorf("produce to %s: %w", topic, err)
	default:
	}
	sec := time.Since(start).Seconds()
	return map[string]any{"topic": topic, "records": count, "record_bytes": len(pool[0]), "seconds": sec, "records_per_sec": float64(count) / sec}, nil
}

// watchResult is what watch prints.
type watchResult struct {
	steady
	Total           int64   `json:"total"`
	WorkerPeakRSS   int64   `json:"worker_peak_rss_bytes"`
	BrokerPeakRSS   int64   `json:"broker_peak_rss_bytes"`
	Samples         int     `json:"samples"`
	WorkerCPUTotalS float64 `json:"worker_cpu_total_s"`
}

func watch(ctx context.Context, args []string) (any, error) {
	var c common
	var w watcher
	var lo, hi float64
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	c.flags(fs, 10*time.Minute)
	fs.StringVar(&w.topic, "topic", "", "the backlog's topic")
	fs.StringVar(&w.group, "group", "", "the worker's consumer group (Kafka Streams: its application.id)")
	fs.IntVar(&w.pid, "pid", 0, "the worker's process")
	fs.IntVar(&w.brokerPid, "broker-pid", 0, "the broker's JVM")
	fs.IntVar(&w.redisPid, "redis-pid", 0, "redis-server, if the worker uses it (0: none)")
	fs.DurationVar(&w.every, "every", 50*time.Millisecond, "sampling interval")
	fs.Float64Var(&lo, "lo", 0.1, "the steady window opens at this fraction of the backlog committed")
	fs.Float64Var(&hi, "hi", 0.9, "and closes at this one")
	var addr, metricsAddr, metricsOut string
	fs.StringVar(&addr, "pprof", "", "the worker's HTTP address, http://host:port, serving /debug/pprof/ (and, for -metrics-out without -metrics, /metrics)")
	fs.StringVar(&metricsAddr, "metrics", "", "the worker's HTTP address serving /metrics, for -metrics-out (default: -pprof's)")
	fs.StringVar(&w.prof.out, "cpu-profile", "", "with -pprof: write the worker's CPU profile, taken from the steady window's start, to this file")
	fs.IntVar(&w.prof.seconds, "profile-seconds", 5, "the CPU profile's length")
	fs.StringVar(&metricsOut, "metrics-out", "", "with -pprof: write the worker's /metrics, read once the backlog is committed, to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	addr = strings.TrimSuffix(addr, "/")
	if metricsAddr = strings.TrimSuffix(metricsAddr, "/"); metricsAddr == "" {
		metricsAddr = addr
	}
	if w.prof.out != "" && addr == "" {
		return nil, errors.New("-cpu-profile needs -pprof")
	}
	if metricsOut != "" && metricsAddr == "" {
		return nil, errors.New("-metrics-out needs -metrics or -pprof")
	}
	if w.prof.out != "" {
		if w.prof.seconds < 1 {
			return nil, fmt.Errorf("-profile-seconds %d: want at least 1", w.prof.seconds)
		}
		w.prof.base = addr
	}
	w.lo = lo
	ctx, cancel, cl, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer cl.Close()
	w.adm = kadm.NewClient(cl)
	total, err := w.backlog(ctx)
	if err != nil {
		return nil, err
	}
	samples, err := w.samples(ctx, total)
	if perr := w.prof.wait(); err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	if metricsOut != "" {
		if err := saveMetrics(ctx, metricsAddr, metricsOut); err != nil {
			return nil, err
		}
	}
	s, err := steadyOf(samples, total, lo, hi)
	if err != nil {
		return nil, err
	}
	res := watchResult{steady: s, Total: total, Samples: len(samples), WorkerCPUTotalS: samples[len(samples)-1].workerCPU.Seconds()}
	if res.WorkerPeakRSS, err = peakRSS(w.pid); err != nil {
		return nil, err
	}
	if res.BrokerPeakRSS, err = peakRSS(w.brokerPid); err != nil {
		return nil, err
	}
	return res, nil
}

// watcher samples a worker draining a backlog: its group's committed
// offsets and the CPU time of the worker, the broker and redis.
type watcher struct {
	adm                      *kadm.Client
	topic, group             string
	pid, brokerPid, redisPid int
	every                    time.Duration
	lo                       float64  // the steady window's opening fraction, where the profile starts
	prof                     profiler // off unless -pprof and -cpu-profile
}

// backlog is the sum of the topic's end offsets.
func (w *watcher) backlog(ctx context.Context) (int64, error) {
	ends, err := w.adm.ListEndOffsets(ctx, w.topic)
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", w.topic, err)
	}
	if err := ends.Error(); err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", w.topic, err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	return total, nil
}

// cpu reads the CPU time of the worker, the broker and (if watched) redis.
func (w *watcher) cpu(n int, committed, total int64) (wk, b, r time.Duration, err error) {
	if wk, err = cpuTime(w.pid); err != nil {
		return 0, 0, 0, fmt.Errorf("worker %d gone after %d samples (committed %d of %d): %w", w.pid, n, committed, total, err)
	}
	if b, err = cpuTime(w.brokerPid); err != nil {
		return 0, 0, 0, fmt.Errorf("broker %d: %w", w.brokerPid, err)
	}
	if w.redisPid != 0 {
		if r, err = cpuTime(w.redisPid); err != nil {
			return 0, 0, 0, fmt.Errorf("redis %d: %w", w.redisPid, err)
		}
	}
	return wk, b, r, nil
}

// samples samples every w.every until the group has committed the whole
// backlog.
func (w *watcher) samples(ctx context.Context, total int64) ([]sample, error) {
	var samples []sample
	var failing time.Time
	for {
		// CPU times first: the committed count is read after them, so a
		// window's records never include ones whose CPU is not counted.
		wk, b, r, err := w.cpu(len(samples), last(samples), total)
		if err != nil {
			return nil, err
		}
		at := time.Now()
		offs, err := w.adm.FetchOffsets(ctx, w.group)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("committed %d of %d: %w", last(samples), total, context.Cause(ctx))
			}
			// A fresh broker's group coordinator may not be loaded yet,
			// nor the group's when it has just been created.
			if !kerr.IsRetriable(err) || failingSince(&failing, at) > time.Minute {
				return nil, fmt.Errorf("offsets of group %s: %w", w.group, err)
			}
			time.Sleep(w.every)
			continue
		}
		failing = time.Time{}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == w.topic && o.Err == nil && o.At > 0 {
				n += o.At
			}
		})
		samples = append(samples, sample{at: at, committed: n, workerCPU: wk, broker: b, redis: r})
		if float64(n) >= w.lo*float64(total) {
			w.prof.start(ctx)
		}
		if n >= total {
			return samples, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("committed %d of %d: %w", n, total, context.Cause(ctx))
		case <-time.After(w.every):
		}
	}
}

// failingSince returns how long errors have lasted at now, noting now as
// their start in *since if they start now.
func failingSince(since *time.Time, now time.Time) time.Duration {
	if since.IsZero() {
		*since = now
	}
	return now.Sub(*since)
}

func last(s []sample) int64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].committed
}

// check reads the first records of a worker's output and checks them:
// "numbered" (flakestream, the peer's splice) wants the number in the
// value's field equal to the flakestream-number header and a
// flakestream-source header that parses; "copy" (the peer's passthrough)
// wants neither.
func check(ctx context.Context, args []string) (any, error) {
	var c common
	var topic, expect, field string
	var n int
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	c.flags(fs, 30*time.Second)
	fs.StringVar(&topic, "topic", "", "the worker's output topic")
	fs.StringVar(&expect, "expect", "numbered", "numbered or copy")
	fs.StringVar(&field, "field", "order_no", "the number field")
	fs.IntVar(&n, "records", 200, "records to check")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if expect != "numbered" && expect != "copy" {
		return nil, fmt.Errorf("-expect %q: want numbered or copy", expect)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("timed out after %s", c.timeout))
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d records read from %s: %w", seen, n, topic, context.Cause(ctx))
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if bad == nil && seen < n {
				bad = checkRecord(r, expect, field)
				seen++
			}
		})
		if bad != nil {
			return nil, bad
		}
	}
	return map[string]any{"topic": topic, "expect": expect, "records_checked": seen}, nil
}

func checkRecord(r *kgo.Record, expect, field string) error {
	num, _ := codec.LastHeader(r.Headers, codec.HeaderNumber)
	src, _ := codec.LastHeader(r.Headers, codec.HeaderSource)
	var v map[string]json.RawMessage
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return fmt.Errorf("%s/%d/%d: value is not a JSON object: %w", r.Topic, r.Partition, r.Offset, err)
	}
	where := fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
	if expect == "copy" {
		if num != nil || src != nil || v[field] != nil {
			return fmt.Errorf("%s: a copy has a number (header %q, field %s)", where, num, v[field])
		}
		return nil
	}
	if num == nil || string(v[field]) != `"`+string(num)+`"` {
		return fmt.Errorf("%s: field %s is %s, header %s is %q: want the header's number as a JSON string", where, field, v[field], codec.HeaderNumber, num)
	}
	if _, _, _, err := codec.ParseSource(string(src)); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

func latency(ctx context.Context, args []string) (any, error) {
	var c common
	var e bench.External
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	c.flags(fs, 2*time.Minute)
	fs.StringVar(&e.Input, "input", "", "the worker's input topic")
	fs.StringVar(&e.Output, "output", "", "the worker's output topic")
	fs.Float64Var(&e.Rate, "rate", 1000, "orders/s sent")
	fs.DurationVar(&e.Duration, "duration", 15*time.Second, "measured, after a warm-up of a fifth of it")
	fs.IntVar(&e.RecordBytes, "record-bytes", 200, "size of each order event")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	e.Brokers = c.seeds()
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("timed out after %s", c.timeout))
	defer cancel()
	return bench.ExternalLatency(ctx, e)
}
