package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxRecordBytes is the size limit the workers run with (--max-record-bytes),
// so that orders.TooLarge events are dead-lettered as too_large.
const MaxRecordBytes = 64 << 10

// Env is one test's Kafka, Redis and topics, and the input records written
// to them so far.
type Env struct {
	Kafka      *testenv.KafkaCluster
	Redis      *testenv.Redis
	Partitions int32
	Input      string // input topic; also the Redis key prefix
	Output     string // Input + ".out"
	DLQ        string // Input + ".dlq"
	Group      string // Input + "-g"
	Codec      *codec.Codec
	// Format, if set, is the value format the worker ran with (Avro or
	// Protobuf through a registry); Check accounts against it. nil: JSON
	// through Codec.
	Format codec.Format
	// VerifyArgs are more flags for VerifyProcess's `flakestream verify`:
	// the value format and registry the worker ran with; on a secured
	// broker, the sign-in of verify's principal.
	VerifyArgs []string

	mu     sync.Mutex
	inputs []*kgo.Record
	logDir string
}

// NewEnv creates the input, output and DLQ topics, each with the given
// number of partitions, on kafka.
func NewEnv(t testing.TB, kafka *testenv.KafkaCluster, redis *testenv.Redis, partitions int32) *Env {
	t.Helper()
	e := &Env{Kafka: kafka, Redis: redis, Partitions: partitions}
	e.Input = kafka.NewTopic(t, partitions)
	e.Output, e.DLQ, e.Group = e.Input+".out", e.Input+".dlq", e.Input+"-g"
	kafka.CreateTopic(t, e.Output, partitions)
	kafka.CreateTopic(t, e.DLQ, partitions)
	var err error
	if e.Codec, err = codec.New(codec.Config{MaxBytes: MaxRecordBytes}); err != nil {
		t.Fatal(err)
	}
	e.logDir = t.TempDir()
	if dir := os.Getenv("FLAKESTREAM_ARTIFACTS"); dir != "" {
		e.logDir = filepath.Join(dir, "logs", sanitize(t.Name()))
		if err := os.MkdirAll(e.logDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, s)
}

// Inputs returns the input records written so far (with their offsets).
func (e *Env) Inputs() []*kgo.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*kgo.Record(nil), e.inputs...)
}

// AddInputs adds records written to the input some other way (by kcat,
// say) to the ones the accounting expects.
func (e *Env) AddInputs(recs []*kgo.Record) {
	e.mu.Lock()
	e.inputs = append(e.inputs, recs...)
	e.mu.Unlock()
}

// Produce writes n orders of the mix to the input topic at once (key-hashed
// over the partitions) and remembers them.
func (e *Env) Produce(t testing.TB, n int, mix orders.Mix) {
	t.Helper()
	recs := orders.Records(e.Input, e.Partitions, n, mix, 200, 1<<40)
	for _, r := range recs {
		r.Partition = -1
	}
	cl := e.Kafka.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("test/faults: produce %d orders: %v", n, err)
	}
	e.AddInputs(recs)
}

// WorkerArgs returns the arguments of `flakestream run` on the env's
// topics, group and Redis, as instance. The workers bootstrap from the
// broker's second client listener when it has one (KafkaClientListener),
// so that a partition of that listener cuts off the workers only. They
// run one lane (--lanes 1), whatever the machine's cores, so that a row's
// group has the members it says; a test that wants lanes passes --lanes
// after them.
func (e *Env) WorkerArgs(instance string) []string {
	return []string{"run", "--lanes", "1", "--brokers", strings.Join(e.WorkerBrokers(), ","), "--redis", e.Redis.URL,
		"--redis-prefix", e.Input, "--input-topic", e.Input, "--output-topic", e.Output, "--dlq-topic", e.DLQ,
		"--group", e.Group, "--instance-id", instance, "--server-id", "1", "--worker-id", "1",
		"--max-record-bytes", fmt.Sprint(MaxRecordBytes), "--txn-timeout", "5s", "--http-addr", "", "--log-level", "debug"}
}

// WorkerBrokers are the addresses the workers bootstrap from: the
// cluster's ClientAddrs if it has them, else its Addrs.
func (e *Env) WorkerBrokers() []string {
	if len(e.Kafka.ClientAddrs) > 0 {
		return e.Kafka.ClientAddrs
	}
	return e.Kafka.Addrs
}

// StartWorker starts `flakestream run` as instance, with extra arguments
// after (and so overriding) WorkerArgs, and after those the flags in
// $FLAKESTREAM_E2E_WORKER_ARGS (split at spaces: how a soak turns a feature
// off for a comparison). Its log is also written to <dir>/<instance>.log,
// where dir is $FLAKESTREAM_ARTIFACTS/logs/<test> if that variable is set,
// else a temporary dir of the test.
func (e *Env) StartWorker(t testing.TB, instance string, extra ...string) *Process {
	t.Helper()
	return e.StartWorkerEnv(t, instance, nil, extra...)
}

// StartWorkerEnv is StartWorker with env (KEY=value) added to the
// worker's environment.
func (e *Env) StartWorkerEnv(t testing.TB, instance string, env []string, extra ...string) *Process {
	t.Helper()
	args := append(e.WorkerArgs(instance), extra...)
	args = append(args, strings.Fields(os.Getenv("FLAKESTREAM_E2E_WORKER_ARGS"))...)
	return StartEnv(t, "worker "+instance, filepath.Join(e.logDir, sanitize(instance)+".log"), env, args...)
}

// LogDir is where the workers' logs go.
func (e *Env) LogDir() string { return e.logDir }

// Committed returns how many input records the group has committed, summed
// over the input partitions, and how many the input holds. The worker
// commits its input offsets in the transaction that writes their output, so
// the first number moves exactly when committed output appears.
func (e *Env) Committed(ctx context.Context, adm *kadm.Client) (committed, in int64, err error) {
	c, i, err := e.CommittedByPartition(ctx, adm)
	for _, v := range c {
		committed += v
	}
	for _, v := range i {
		in += v
	}
	return committed, in, err
}

// CommittedByPartition is Committed for each input partition.
func (e *Env) CommittedByPartition(ctx context.Context, adm *kadm.Client) (committed, in map[int32]int64, err error) {
	ends, err := adm.ListEndOffsets(ctx, e.Input)
	if err != nil {
		return nil, nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, nil, err
	}
	in = map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { in[o.Partition] = o.Offset })
	offs, err := adm.FetchOffsets(ctx, e.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, in, nil // no member has joined yet
	}
	if err != nil {
		return nil, nil, err
	}
	if err := offs.Error(); err != nil {
		return nil, nil, err
	}
	committed = map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.Input && o.At > 0 {
			committed[o.Partition] = o.At
		}
	})
	return committed, in, nil
}

// WaitCommitted waits until the group has committed every input record
// written so far, or timeout passes; it returns the committed count.
func (e *Env) WaitCommitted(t testing.TB, timeout time.Duration) (int64, bool) {
	t.Helper()
	adm := e.Kafka.Admin(t)
	want := int64(len(e.Inputs()))
	var last int64
	ok := accounting.WaitFor(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := e.Committed(ctx, adm)
		if err == nil {
			last = c
		}
		return err == nil && c >= want
	})
	return last, ok
}

// Check reads the output and DLQ read_committed until they hold every input
// record (or timeout passes) and returns the accounting.
func (e *Env) Check(t testing.TB, timeout time.Duration) accounting.Report {
	t.Helper()
	inputs := e.Inputs()
	var rep accounting.Report
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), 30*time.Second))
		out, err := accounting.ReadCommittedWith(ctx, e.Kafka.ClientOpts(t), e.Output)
		var dlq []*kgo.Record
		if err == nil {
			dlq, err = accounting.ReadCommittedWith(ctx, e.Kafka.ClientOpts(t), e.DLQ)
		}
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			f := e.Format
			if f == nil {
				f = codec.JSONFormat{C: e.Codec}
			}
			rep = accounting.CheckFormat(context.Background(), f, inputs, out, dlq)
		}
		if (err == nil && rep.Numbered+rep.Passthrough+rep.DLQ >= len(inputs)) || time.Now().After(deadline) {
			if err != nil {
				t.Logf("test/faults: read output: %v", err)
			}
			return rep
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// DLQClasses counts the dead letters by their error class header.
func (e *Env) DLQClasses(t testing.TB) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := accounting.ReadCommittedWith(ctx, e.Kafka.ClientOpts(t), e.DLQ)
	if err != nil {
		t.Fatalf("test/faults: read DLQ: %v", err)
	}
	m := map[string]int{}
	for _, r := range recs {
		c, _ := accounting.Header(r, codec.HeaderErrorClass)
		m[c]++
	}
	return m
}

// SortedKeys returns m's keys in order (for stable log lines).
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
