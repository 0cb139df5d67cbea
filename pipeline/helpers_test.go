package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/test/pipetest"
)

// setLoop changes the loop's settings from a test's option list, so that
// the helpers below can take a test's settings and options as one list.
func setLoop(f func(*eos.Config)) Opt { return func(c *cfg) { f(&c.eos) } }

// worker is a worker running in a goroutine of the test.
type worker struct {
	w *Worker
	*pipetest.Running
}

// start runs a worker on e with instance ID instance until stop or the
// end of the test.
func start(t testing.TB, e *pipetest.Env, instance string, opts ...Opt) *worker {
	t.Helper()
	s := eos.Config{Brokers: e.Kafka.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: instance,
		TransactionTimeout: 5 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: pipetest.Logger(t)}
	base := []Opt{OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(e.Generator(t, 1)), Codec(e.Codec)}
	w, err := NewWorker(s, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &worker{w: w, Running: pipetest.Go(t, "worker", w.Run)}
}

func (wk *worker) stop(t testing.TB) { wk.Stop(t) }
