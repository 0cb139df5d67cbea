package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/eos"
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
		Brokers: kfakeBrokers(t), NewNumberer: memoryNumberer, Duration: 200 * time.Millisecond, Pairs: 1,
		RecordBytes: 200, Partitions: 1,
		Worker: []pipeline.Opt{pipeline.DLQTopic("bench-no-such-dlq"), pipeline.TopicWait(0)},
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
