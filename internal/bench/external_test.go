package bench

import (
	"context"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExternalLatency counts every order sent after the warm-up once, through a
// worker it does not run, and orders its percentiles; an output nobody
// writes is an error, not a figure. How many orders the paced feed sends
// in the window is the clock's doing, so the test checks the accounting
// instead: a copy of every order sent after the warm-up is counted, once.
func TestExternalLatencyThroughAWorkerItDoesNotRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	brokers := kfakeBrokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"ext-in", "ext-in.dlq", "ext-out", "ext-silent"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	g, err := memoryNumberer()
	if err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.NewWorker(eos.Config{Brokers: brokers, Topics: []string{"ext-in"}, Group: "ext-g", InstanceID: "ext"},
		pipeline.OutputTopic("ext-out"), pipeline.Numbers(g))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := runMeasured(ctx, "worker", w.Run)
	defer stop()
	if !waitReady(wctx, w, time.Minute) {
		t.Fatalf("worker not ready: %v", context.Cause(wctx))
	}

	const rate, d = 500, 500 * time.Millisecond
	// The grace only bounds a worker slowed by a loaded machine: reading
	// ends once every copy is in.
	lat, err := ExternalLatency(ctx, External{Brokers: brokers, Input: "ext-in", Output: "ext-out",
		Rate: rate, Duration: d, RecordBytes: 200, Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if lat.Sent == 0 || lat.Records != lat.Sent {
		t.Errorf("records %d, want one for each of the %d orders sent after the warm-up", lat.Records, lat.Sent)
	}
	if !(0 < lat.P50Ms && lat.P50Ms <= lat.P90Ms && lat.P90Ms <= lat.P99Ms && lat.P99Ms <= lat.MaxMs) {
		t.Errorf("percentiles out of order: %+v", lat)
	}

	_, err = ExternalLatency(ctx, External{Brokers: brokers, Input: "ext-in", Output: "ext-silent",
		Rate: rate, Duration: 100 * time.Millisecond, RecordBytes: 200, Grace: 100 * time.Millisecond})
	if err == nil {
		t.Error("ExternalLatency of an output nobody writes: no error")
	}
	if _, err := ExternalLatency(ctx, External{Brokers: brokers, Input: "ext-in", Output: "ext-none",
		Rate: rate, Duration: 100 * time.Millisecond, RecordBytes: 200}); err == nil {
		t.Error("ExternalLatency of an output topic that does not exist: no error")
	}
}
