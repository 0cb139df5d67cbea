package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kfake"
)

func kfakeBrokers(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func memoryNumberer() (*idgen.Generator, error) {
	return idgen.New(idgen.Settings{Sequencer: idgen.NewMemorySequencer(time.Now)})
}

// A worker that fails at start ends the bench with the worker's own error,
// not with "nothing committed" after the bench's one-minute wait. (Its DLQ
// topic does not exist and it may not wait for it; the passthrough before
// it needs no DLQ and runs.)
func TestBenchReportsAWorkersFailureWithItsError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	_, err := Run(ctx, Config{
		Loop: eos.Config{Brokers: kfakeBrokers(t), TopicWait: eos.NoWait(0)}, NewNumberer: memoryNumberer, Duration: 200 * time.Millisecond, Pairs: 1,
		RecordBytes: 200, Partitions: 1,
		Worker: []pipeline.Opt{pipeline.DLQTopic("bench-no-such-dlq")},
	})
	if !errors.Is(err, eos.ErrMissingTopic) || !strings.HasPrefix(err.Error(), "worker: ") || !strings.Contains(err.Error(), "bench-no-such-dlq") {
		t.Fatalf("Run = %v, want the worker's ErrMissingTopic for bench-no-such-dlq", err)
	}
}

// A loop that returns without an error before the measurement ends is a
// failure too, and ends the wait at once.
func TestRunMeasuredEndsWhenTheLoopReturns(t *testing.T) {
	ctx, stop := runMeasured(t.Context(), "worker", func(context.Context) error { return nil })
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end when the loop returned")
	}
	if err := context.Cause(ctx); !errors.Is(err, errStopped) || err.Error() != "worker: "+errStopped.Error() {
		t.Fatalf("cause %v, want worker: %v", err, errStopped)
	}
}

// A whole bench on kfake measures latency twice, at LatencyRate and at
// half the worker's throughput, with percentiles in order and every phase
// of the worker's transactions.
func TestBenchLatencyAtTwoRates(t *testing.T) {
	// The bounds are for a starved machine; a quiet one takes seconds.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Loop: eos.Config{Brokers: kfakeBrokers(t)}, NewNumberer: memoryNumberer, Duration: 2 * time.Second, Pairs: 1,
		RecordBytes: 200, Partitions: 2, LatencyRate: 300, Stall: 3 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Latency) != 2 || res.Latency[0].Rate != 300 || res.Latency[1].Rate != res.RecordsPerSec["worker"]/2 {
		t.Fatalf("latency measured at %+v, want 300/s then half of %.0f/s", res.Latency, res.RecordsPerSec["worker"])
	}
	for _, l := range res.Latency {
		if l.Records == 0 || !(0 < l.P50Ms && l.P50Ms <= l.P90Ms && l.P90Ms <= l.P99Ms && l.P99Ms <= l.MaxMs) {
			t.Errorf("at %.0f/s: %d records, p50 %.1f p90 %.1f p99 %.1f max %.1f ms", l.Rate, l.Records, l.P50Ms, l.P90Ms, l.P99Ms, l.MaxMs)
		}
		if l.Transactions == 0 || len(l.PhaseMeanMs) != len(eos.Phases) {
			t.Errorf("at %.0f/s: %d transactions, phases %v", l.Rate, l.Transactions, l.PhaseMeanMs)
		}
	}
	if half := res.Latency[1]; res.P50Ms != half.P50Ms || res.LatencyRate != half.Rate {
		t.Errorf("p50_ms and latency_input_rate are not the half-throughput measurement's")
	}
}
