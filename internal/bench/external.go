package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/twmb/franz-go/pkg/kadm"
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
	// Grace is how long reading goes on at most after sending stopped,
	// so that the slowest copies of the last orders sent are counted
	// instead of cut off, which would flatter the tail; reading ends as
	// soon as a copy of every order counted has been seen. 0 means 3s.
	Grace time.Duration
}

// defaultGrace is External.Grace's default: well above any latency the
// peer bench reports.
const defaultGrace = 3 * time.Second

// ExternalLatency measures an External worker's latency the way the bench
// measures its own: it sends orders to Input at Rate, each with its send
// time in a header, and a read_committed consumer of Output, which starts
// at Output's end offsets as they were before the first order was sent,
// notes when each copy becomes visible. Only records sent after the
// warm-up count; Sent says how many of those the broker acknowledged, and
// reading stops once Records reaches it or the grace ends. The worker must
// copy input headers to its output, as flakestream and Kafka Streams do.
// Transactions and PhaseMeanMs stay zero: they are the worker's own
// metrics.
func ExternalLatency(ctx context.Context, e External) (Latency, error) {
	res := Latency{Rate: e.Rate}
	if e.Rate <= 0 || e.Duration <= 0 {
		return res, fmt.Errorf("latency: want a positive rate and duration, have %v and %s", e.Rate, e.Duration)
	}
	cons, err := outputConsumer(ctx, e)
	if err != nil {
		return res, err
	}
	defer cons.Close()
	b := &runner{cfg: Config{Loop: eos.Config{Brokers: e.Brokers}, RecordBytes: e.RecordBytes}}
	start := time.Now()
	warm := start.Add(e.Duration / 5).UnixNano()
	var sent atomic.Int64
	stop, err := b.feed(ctx, e.Input, e.Rate, func() int64 { return 0 }, 0, func(ns int64) {
		if ns >= warm {
			sent.Add(1)
		}
	})
	if err != nil {
		return res, err
	}
	stopFeed := sync.OnceFunc(stop)
	defer stopFeed()
	if e.Grace <= 0 {
		e.Grace = defaultGrace
	}
	deadline := start.Add(e.Duration + e.Duration/5)
	end := deadline.Add(e.Grace)
	stopped := false
	var lat []float64
	for now := time.Now(); now.Before(end); now = time.Now() {
		if !stopped && now.After(deadline) {
			stopFeed() // returns once every acknowledgement is counted
			stopped = true
			res.Sent = int(sent.Load())
		}
		if stopped && len(lat) >= res.Sent {
			break // a copy of every order counted is in: nothing left to wait for
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
	if !stopped { // the last poll outlasted the grace
		stopFeed()
		res.Sent = int(sent.Load())
	}
	if len(lat) == 0 {
		return res, fmt.Errorf("latency: none of the %d records sent to %s after the warm-up came through to %s in %s", res.Sent, e.Input, e.Output, e.Duration+e.Duration/5+e.Grace)
	}
	sort.Float64s(lat)
	at := func(q float64) float64 { return lat[min(int(q*float64(len(lat))), len(lat)-1)] }
	res.Records, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = len(lat), at(0.5), at(0.9), at(0.99), lat[len(lat)-1]
	return res, nil
}

// outputConsumer is a read_committed consumer of e.Output from its end
// offsets now: looked up before any order is sent, so that no copy of an
// order sent after the warm-up is missed however slowly the consumer
// starts.
func outputConsumer(ctx context.Context, e External) (*kgo.Client, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, e.Output)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("latency: end offsets of %s: %w", e.Output, err)
	}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) { from[o.Partition] = kgo.NewOffset().At(o.Offset) })
	if len(from) == 0 {
		return nil, fmt.Errorf("latency: output topic %s has no partitions", e.Output)
	}
	return kgo.NewClient(kgo.SeedBrokers(e.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.Output: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
}
