package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/testenv"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testCodec is the codec the tests run the worker with: the defaults, with a
// 64 KiB size limit so that orders.TooLarge is dead-lettered.
func testCodec(t testing.TB) *codec.Codec {
	t.Helper()
	c, err := codec.New(codec.Config{MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// env is one test's Kafka, Redis and topics.
type env struct {
	kafka           *testenv.KafkaCluster
	redis           *testenv.Redis
	prefix          string
	input, out, dlq string
	partitions      int32
	codec           *codec.Codec
	inputs          []*kgo.Record
	group           string
}

func newEnv(t *testing.T, partitions int32, kopts ...testenv.KafkaOpt) *env {
	t.Helper()
	e := &env{
		kafka:      testenv.Kafka(t, kopts...),
		redis:      testenv.RedisServer(t),
		prefix:     "t" + strconv.FormatInt(rand.Int64(), 36),
		partitions: partitions,
		codec:      testCodec(t),
	}
	e.input = e.kafka.NewTopic(t, partitions)
	e.out = e.input + ".out"
	e.dlq = e.input + ".dlq"
	e.kafka.CreateTopic(t, e.out, partitions)
	e.kafka.CreateTopic(t, e.dlq, partitions)
	e.group = e.input + "-g"
	return e
}

// produce writes n orders of the mix to the input topic and remembers them.
func (e *env) produce(t testing.TB, n int, mix orders.Mix) {
	t.Helper()
	recs := orders.Records(e.input, e.partitions, n, mix, 200, 1<<40+int64(len(e.inputs))*1000)
	cl := e.kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < len(recs); i += 5000 {
		if err := cl.ProduceSync(ctx, recs[i:min(i+5000, len(recs))]...).FirstErr(); err != nil {
			t.Fatalf("produce orders: %v", err)
		}
	}
	e.inputs = append(e.inputs, recs...)
}

// generator returns a generator on the env's Redis for worker ID worker.
func (e *env) generator(t testing.TB, worker int64) *idgen.Generator {
	t.Helper()
	c := e.redis.Client(t)
	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: c, Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: worker, Sequencer: seq})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// worker is a worker running in a goroutine of the test.
type worker struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan error
}

// start runs a worker with instance ID instance until stop or the test ends.
func (e *env) start(t testing.TB, instance string, opts ...Opt) *worker {
	t.Helper()
	base := []Opt{
		Brokers(e.kafka.Addrs...), InputTopics(e.input), OutputTopic(e.out), DLQTopic(e.dlq),
		Group(e.group), InstanceID(instance), Numbers(e.generator(t, 1)), Codec(e.codec),
		TransactionTimeout(5 * time.Second), Backoff(50*time.Millisecond, 500*time.Millisecond),
		Logger(testLogger(t)),
	}
	w, err := NewWorker(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wk := &worker{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { wk.done <- w.Run(ctx) }()
	t.Cleanup(func() { wk.stop(t) })
	return wk
}

// stop cancels the worker and waits for Run to return; it fails the test on
// an error from Run or a shutdown over the bound.
func (wk *worker) stop(t testing.TB) {
	t.Helper()
	if wk.cancel == nil {
		return
	}
	wk.cancel()
	wk.cancel = nil
	select {
	case err := <-wk.done:
		if err != nil {
			t.Errorf("worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker did not stop within 30s")
	}
}

// waitOutput waits until output and DLQ together hold every input (or the
// timeout passes) and returns the accounting.
func (e *env) waitOutput(t testing.TB, timeout time.Duration) verify.Report {
	t.Helper()
	var rep verify.Report
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := verify.ReadCommitted(ctx, e.kafka.Addrs, e.out)
		var dlq []*kgo.Record
		if err == nil {
			dlq, err = verify.ReadCommitted(ctx, e.kafka.Addrs, e.dlq)
		}
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read output: %v", err)
		}
		rep = verify.Check(e.codec, e.inputs, out, dlq)
		if rep.Numbered+rep.Passthrough+rep.DLQ >= len(e.inputs) || time.Now().After(deadline) {
			return rep
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func requireExactlyOnce(t testing.TB, rep verify.Report) {
	t.Helper()
	if !rep.OK() {
		t.Fatalf("not exactly once: %s", rep)
	}
	t.Logf("exactly once: %s", rep)
}

// testLogger logs to the test output when -v or FLAKESTREAM_TEST_LOG=1.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("FLAKESTREAM_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// readTopic reads every committed record of topic.
func readTopic(e *env, topic string) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return verify.ReadCommitted(ctx, e.kafka.Addrs, topic)
}
