package verify_test

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/verify"
)

// Records the worker has not reached yet are pending, not lost, when
// verify knows the worker's group: a range that is only pending is exact.
// Without the group they count as lost; with Wait, verify waits for the
// worker to commit them and then finds them all.
func TestPending(t *testing.T) {
	f := newFixture(t)
	f.e.Produce(t, 500, orders.Mix{}) // no worker runs: these are not done
	res := f.run(t, func(c *verify.Config) { c.Group = f.e.Group })
	if res.Pending != 500 || res.Lost != 0 || !res.Exact {
		t.Fatalf("%s: want 500 pending, none lost, exact", res.Report)
	}
	res = f.run(t, nil)
	if res.Lost != 500 || res.Pending != 0 || res.Exact {
		t.Fatalf("without the group: %s: want 500 lost, not exact", res.Report)
	}
	res = f.run(t, func(c *verify.Config) { c.Group = "no-such-group" })
	if res.Lost != 500 || len(res.Notes) == 0 {
		t.Fatalf("with a group that committed nothing: %s, notes %q: want 500 lost and a note", res.Report, res.Notes)
	}

	// The worker comes back; verify waits for it to commit the range.
	w, err := pipeline.NewWorker(eos.Config{Brokers: f.e.Kafka.Addrs, Topics: f.inputs, Group: f.e.Group, InstanceID: "v", TransactionTimeout: 5 * time.Second,
		Logger: pipetest.Logger(t)}, pipeline.OutputTopic(f.out), pipeline.DLQTopic(f.dlq), pipeline.Numbers(f.e.Generator(t, 1)), pipeline.Codec(f.e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	run := pipetest.Go(t, "worker", w.Run)
	defer run.Stop(t)
	res = f.run(t, func(c *verify.Config) { c.Group, c.Wait = f.e.Group, 50*time.Second })
	if res.Pending != 0 || res.Lost != 0 || !res.Exact || res.Input != int64(f.n+500) {
		t.Fatalf("after waiting for the worker: %s: want all %d done, exact", res.Report, f.n+500)
	}
}
