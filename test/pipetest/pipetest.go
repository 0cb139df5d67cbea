// Package pipetest is the test bench of the products in pipeline/...: one
// test's Kafka, Redis and topics, orders fed in, the output read back and
// accounted for. It is for tests only.
package pipetest

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
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Codec is the codec the tests run the worker with: the defaults, with a
// 64 KiB size limit so that orders.TooLarge is dead-lettered.
func Codec(t testing.TB) *codec.Codec {
	t.Helper()
	c, err := codec.New(codec.Config{MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Env is one test's Kafka, Redis and topics.
type Env struct {
	Kafka           *testenv.KafkaCluster
	Redis           *testenv.Redis
	Prefix          string
	Input, Out, DLQ string
	Partitions      int32
	Codec           *codec.Codec
	Inputs          []*kgo.Record
	Group           string
}

func NewEnv(t *testing.T, partitions int32, kopts ...testenv.KafkaOpt) *Env {
	t.Helper()
	e := &Env{
		Kafka:      testenv.Kafka(t, kopts...),
		Redis:      testenv.RedisServer(t),
		Prefix:     "t" + strconv.FormatInt(rand.Int64(), 36),
		Partitions: partitions,
		Codec:      Codec(t),
	}
	e.Input = e.Kafka.NewTopic(t, partitions)
	e.Out = e.Input + ".out"
	e.DLQ = e.Input + ".dlq"
	e.Kafka.CreateTopic(t, e.Out, partitions)
	e.Kafka.CreateTopic(t, e.DLQ, partitions)
	e.Group = e.Input + "-g"
	return e
}

// Produce writes n orders of the mix to the input topic and remembers them.
func (e *Env) Produce(t testing.TB, n int, mix orders.Mix) {
	t.Helper()
	recs := orders.Records(e.Input, e.Partitions, n, mix, 200, 1<<40+int64(len(e.Inputs))*1000)
	cl := e.Kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < len(recs); i += 5000 {
		if err := cl.ProduceSync(ctx, recs[i:min(i+5000, len(recs))]...).FirstErr(); err != nil {
			t.Fatalf("produce orders: %v", err)
		}
	}
	e.Inputs = append(e.Inputs, recs...)
}

// Generator returns a generator on the env's Redis for worker ID worker.
func (e *Env) Generator(t testing.TB, worker int64) *idgen.Generator {
	t.Helper()
	c := e.Redis.Client(t)
	seq, err := idgen.NewRedisSequencer(idgen.RedisSettings{Client: c, Prefix: e.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idgen.New(idgen.Settings{ServerID: 1, WorkerID: worker, Sequencer: seq})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// WaitOutput waits until output and DLQ together hold every input (or the
// timeout passes) and returns the accounting.
func (e *Env) WaitOutput(t testing.TB, timeout time.Duration) accounting.Report {
	t.Helper()
	var rep accounting.Report
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.Out)
		var dlq []*kgo.Record
		if err == nil {
			dlq, err = accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.DLQ)
		}
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read output: %v", err)
		}
		rep = accounting.Check(e.Codec, e.Inputs, out, dlq)
		if rep.Numbered+rep.Passthrough+rep.DLQ >= len(e.Inputs) || time.Now().After(deadline) {
			return rep
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// RequireExactlyOnce fails the test unless rep is exactly once.
func RequireExactlyOnce(t testing.TB, rep accounting.Report) {
	t.Helper()
	if !rep.OK() {
		t.Fatalf("not exactly once: %s", rep)
	}
	t.Logf("exactly once: %s", rep)
}

// Logger logs to the test output when -v or FLAKESTREAM_TEST_LOG=1.
func Logger(t testing.TB) *slog.Logger {
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

// ReadTopic reads every committed record of topic.
func (e *Env) ReadTopic(topic string) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return accounting.ReadCommitted(ctx, e.Kafka.Addrs, topic)
}

// KeyStore returns an idempotency key store on the env's Redis.
func (e *Env) KeyStore(t *testing.T) *idgen.KeyStore {
	t.Helper()
	s, err := idgen.NewKeyStore(e.Redis.Client(t), e.Prefix, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// On is a second input topic, with its own output, on e's Kafka and Redis.
func (e *Env) On(t *testing.T) *Env {
	t.Helper()
	o := *e
	o.Inputs = nil
	o.Input = e.Kafka.NewTopic(t, e.Partitions)
	o.Out, o.DLQ, o.Group = o.Input+".out", o.Input+".dlq", o.Input+"-g"
	e.Kafka.CreateTopic(t, o.Out, e.Partitions)
	e.Kafka.CreateTopic(t, o.DLQ, e.Partitions)
	return &o
}

// Running is a Run method running in a goroutine of the test.
type Running struct {
	what   string
	cancel context.CancelFunc
	done   chan error
}

// Go runs run until Stop or the end of the test.
func Go(t testing.TB, what string, run func(context.Context) error) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{what: what, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Stop cancels run and waits for it to return; it fails the test on an
// error from run or a shutdown over 30s.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: %v", r.what, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s", r.what)
	}
}

// NumbersByRef maps each order_ref in records to its number header.
func NumbersByRef(t *testing.T, recs []*kgo.Record) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range recs {
		ref, ok, err := codec.Field(r.Value, "order_ref")
		if err != nil || !ok {
			t.Fatalf("output without order_ref: %s", r.Value)
		}
		num, _ := accounting.Header(r, codec.HeaderNumber)
		if prev, dup := m[string(ref)]; dup && prev != num {
			t.Fatalf("order %s has numbers %s and %s in one topic", ref, prev, num)
		}
		m[string(ref)] = num
	}
	return m
}
