package pipeline

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/test/testenv"
)

// A worker started before its input, output and DLQ topics exist (they are
// created a moment later, as by a deploy script) waits for them and numbers
// every order exactly once, instead of exiting with eos.ErrMissingTopic. Run it
// with FLAKESTREAM_KAFKA_LOCAL=1 for a real broker, where a new topic's
// metadata also lags its creation.
func TestWorkerWaitsForTopicsCreatedAfterItStarts(t *testing.T) {
	k := testenv.Kafka(t)
	e := &pipetest.Env{Kafka: k, Redis: testenv.RedisServer(t), Prefix: "t" + strconv.FormatInt(rand.Int64(), 36),
		Partitions: 2, Codec: pipetest.Codec(t), Input: testenv.KafkaTopicName(t)}
	e.Out, e.DLQ, e.Group = e.Input+".out", e.Input+".dlq", e.Input+"-g"
	w, err := NewWorker(eos.Config{Brokers: k.Addrs, Topics: []string{e.Input}, Group: e.Group, InstanceID: "a", Logger: pipetest.Logger(t), TopicWait: eos.NoWait(60 * time.Second)}, OutputTopic(e.Out), DLQTopic(e.DLQ), Numbers(e.Generator(t, 1)), Codec(e.Codec))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	select {
	case err := <-done:
		done <- err
		t.Fatalf("worker ended before its topics existed: %v", err)
	case <-time.After(time.Second): // the worker is waiting by now
	}
	for _, topic := range []string{e.Input, e.Out, e.DLQ} {
		k.CreateTopic(t, topic, e.Partitions)
	}
	e.Produce(t, 200, orders.Mix{})
	pipetest.RequireExactlyOnce(t, e.WaitOutput(t, 60*time.Second))
}
