package pipeline

import (
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/pipetest"
)

// worker is a worker running in a goroutine of the test.
type worker struct {
	w *Worker
	*pipetest.Running
}

// start runs a worker on e with instance ID instance until stop or the
// end of the test.
func start(t testing.TB, e *pipetest.Env, instance string, opts ...Opt) *worker {
	t.Helper()
	base := []Opt{
		Brokers(e.Kafka.Addrs...), InputTopics(e.Input), OutputTopic(e.Out), DLQTopic(e.DLQ),
		Group(e.Group), InstanceID(instance), Numbers(e.Generator(t, 1)), Codec(e.Codec),
		TransactionTimeout(5 * time.Second), Backoff(50*time.Millisecond, 500*time.Millisecond),
		Logger(pipetest.Logger(t)),
	}
	w, err := NewWorker(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &worker{w: w, Running: pipetest.Go(t, "worker", w.Run)}
}

func (wk *worker) stop(t testing.TB) { wk.Stop(t) }
