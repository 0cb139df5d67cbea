package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/flakestream/flakestream/pipeline/loop"
	"github.com/twmb/franz-go/pkg/kgo"
)

// External says which worker another process runs and how to measure its
// latency: flakestream run, or a peer such as the Kafka Streams app of
// bench/peer/kstreams, reading Input and writing Output on Brokers.
type External struct {
	Brokers       []string
	Input, Output string
	Rate          float64       // orders/s sent to Input
	Duration      time.Duration // measured, after a warm-up of a fifth of it
	RecordBytes   int           // size of each order event
	// Grace is how long reading goes on after sending stopped, so that
	// the slowest copies of the last orders sent are counted instead of
	// cut off, which would flatter the tail; 0 means 3s.
	Grace time.Duration
}

// defaultGrace is External.Grace's default: well above any latency the
// peer bench reports.
const defaultGrace = 3 * time.Second

// ExternalLatency measures an External worker's latency the way the bench
// measures its own: it sends orders to Input at Rate, each with its send
// time in a header, and a read_committed consumer of Output, which starts
// at Output's end, notes when each copy becomes visible. Only records sent
// after the warm-up count. The worker must copy input headers to its
// output, as flakestream and Kafka Streams do. Transactions and
// PhaseMeanMs stay zero: they are the worker's own metrics.
func ExternalLatency(ctx context.Context, e External) (Latency, error) {
	res := Latency{Rate: e.Rate}
	if e.Rate <= 0 || e.Duration <= 0 {
		return res, fmt.Errorf("latency: want a positive rate and duration, have %v and %s", e.Rate, e.Duration)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...), kgo.ConsumeTopics(e.Output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cons.Close()
	// A first short poll makes the consumer look up its start offsets
	// before orders are sent; a copy it misses all the same is one sent
	// in the warm-up, which does not count.
	if err := cons.Ping(ctx); err != nil {
		return res, err
	}
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	cons.PollFetches(pctx)
	cancel()
	b := &runner{cfg: Config{Loop: loop.Settings{Brokers: e.Brokers}, RecordBytes: e.RecordBytes}}
	start := time.Now()
	_, stop, err := b.feed(ctx, e.Input, e.Rate, func() int64 { return 0 }, 0)
	if err != nil {
		return res, err
	}
	stopFeed := sync.OnceFunc(stop)
	defer stopFeed()
	warm := start.Add(e.Duration / 5).UnixNano()
	if e.Grace <= 0 {
		e.Grace = defaultGrace
	}
	deadline := start.Add(e.Duration + e.Duration/5)
	end := deadline.Add(e.Grace)
	stopped := false
	var lat []float64
	for now := time.Now(); now.Before(end); now = time.Now() {
		if !stopped && now.After(deadline) {
			stopFeed()
			stopped = true
		}
		until := end
		if !stopped {
			until = deadline
		}
		pctx, cancel := context.WithDeadline(ctx, until)
		fs := cons.PollFetches(pctx)
		cancel()
		seen := time.Now().UnixNano()
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key != "bench-sent" {
					continue
				}
				if ns, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil && ns >= warm {
					lat = append(lat, float64(seen-ns)/1e6)
				}
			}
		})
		if ctx.Err() != nil {
			return res, context.Cause(ctx)
		}
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("latency: no record sent to %s came through to %s in %s", e.Input, e.Output, e.Duration+e.Duration/5+e.Grace)
	}
	sort.Float64s(lat)
	at := func(q float64) float64 { return lat[min(int(q*float64(len(lat))), len(lat)-1)] }
	res.Records, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = len(lat), at(0.5), at(0.9), at(0.99), lat[len(lat)-1]
	return res, nil
}
