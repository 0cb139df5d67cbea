package bench

import (
	"context"
	"testing"
	"time"

	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/pipeline/loop"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExternalLatency counts every order sent after the warm-up once, through a
// worker it does not run, and orders its percentiles; an output nobody
// writes is an error, not a figure.
func TestExternalLatencyThroughAWorkerItDoesNotRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
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
	w, err := pipeline.NewWorker(loop.Settings{Brokers: brokers, Topics: []string{"ext-in"}, Group: "ext-g", InstanceID: "ext"},
		pipeline.OutputTopic("ext-out"), pipeline.Numbers(g))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := runMeasured(ctx, "worker", w.Run)
	defer stop()
	if !waitReady(wctx, w) {
		t.Fatalf("worker not ready: %v", context.Cause(wctx))
	}

	const rate, d = 500, 500 * time.Millisecond
	lat, err := ExternalLatency(ctx, External{Brokers: brokers, Input: "ext-in", Output: "ext-out",
		Rate: rate, Duration: d, RecordBytes: 200, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// rate × d orders are sent after the warm-up, give or take the one
	// on the boundary.
	if want := int(rate * d.Seconds()); lat.Records < want-2 || lat.Records > want+2 {
		t.Errorf("records %d, want %d±2", lat.Records, want)
	}
	if !(0 < lat.P50Ms && lat.P50Ms <= lat.P90Ms && lat.P90Ms <= lat.P99Ms && lat.P99Ms <= lat.MaxMs) {
		t.Errorf("percentiles out of order: %+v", lat)
	}

	_, err = ExternalLatency(ctx, External{Brokers: brokers, Input: "ext-in", Output: "ext-silent",
		Rate: rate, Duration: 100 * time.Millisecond, RecordBytes: 200, Grace: 100 * time.Millisecond})
	if err == nil {
		t.Error("ExternalLatency of an output nobody writes: no error")
	}
}
