package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// verifyKeys are the keys of `verify --json` that outside checks read.
var verifyKeys = []string{"input", "numbered", "passthrough", "dead_lettered", "lost", "pending", "duplicated", "renumbered",
	"duplicate_numbers", "unattributed", "not_checkable", "exact"}

// numberedCopies writes n orders to input and, as a worker would, a
// numbered copy of each to output; it returns the copies.
func numberedCopies(t *testing.T, k *testenv.KafkaCluster, input, output string, n int) []*kgo.Record {
	t.Helper()
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ins := orders.Records(input, 2, n, orders.Mix{}, 100, 0)
	if err := cl.ProduceSync(ctx, ins...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	outs := make([]*kgo.Record, n)
	for i, r := range ins {
		num := strconv.FormatInt(int64(1)<<40+int64(i), 10)
		outs[i] = &kgo.Record{Topic: output, Partition: r.Partition, Value: []byte(`{"order_no":"` + num + `"}`), Headers: []kgo.RecordHeader{
			{Key: codec.HeaderNumber, Value: []byte(num)},
			{Key: codec.HeaderSource, Value: codec.AppendSource(nil, r.Topic, r.Partition, r.Offset)},
		}}
	}
	if err := cl.ProduceSync(ctx, outs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return outs
}

func TestVerifyExitCodesAndJSON(t *testing.T) {
	k := testenv.Kafka(t)
	input := k.NewTopic(t, 2)
	output := input + ".out"
	k.CreateTopic(t, output, 2)
	outs := numberedCopies(t, k, input, output, 200)
	args := []string{"verify", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", input, "--output-topic", output, "--json"}

	stdout, stderr, code := runApp(t, "", nil, args...)
	if code != 0 {
		t.Fatalf("clean range: exit %d, stderr %q", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json printed %q: %v", stdout, err)
	}
	for _, key := range verifyKeys {
		if _, ok := rep[key]; !ok {
			t.Errorf("--json has no key %q: %s", key, stdout)
		}
	}
	if rep["input"] != 200.0 || rep["numbered"] != 200.0 || rep["exact"] != true {
		t.Fatalf("clean range: %s", stdout)
	}

	// A copy of a numbered record with another number: renumbered, exit 1.
	again := &kgo.Record{Topic: output, Partition: outs[7].Partition, Value: outs[7].Value,
		Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: []byte("42")}, outs[7].Headers[1]}}
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), again).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runApp(t, "", nil, args...)
	rep = nil
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json printed %q: %v", stdout, err)
	}
	if code != 1 || rep["renumbered"] != 1.0 || rep["duplicated"] != 1.0 || rep["exact"] != false {
		t.Fatalf("renumbered: exit %d, %s, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "renumbered 1") {
		t.Errorf("stderr %q does not name the fault", stderr)
	}

	// The table names the fault with its source and numbers.
	stdout, _, code = runApp(t, "", nil, args[:len(args)-1]...)
	src := string(outs[7].Headers[1].Value)
	if code != 1 || !strings.Contains(stdout, "renumbered (first 1):") || !strings.Contains(stdout, "source "+src) || !strings.Contains(stdout, "42]") {
		t.Fatalf("table: exit %d:\n%s", code, stdout)
	}
}

func TestVerifyUsageAndConnectionErrors(t *testing.T) {
	k := testenv.Kafka(t)
	input := k.NewTopic(t, 1)
	base := []string{"verify", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", input}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no output topic", nil, "--output-topic are required"},
		{"missing output topic", []string{"--output-topic", "nope"}, "nope does not exist"},
		{"bad from", []string{"--output-topic", input + ".out", "--from", "yesterday"}, "--from"},
		{"both forms of a bound", []string{"--output-topic", input + ".out", "--to", "2026-01-01T00:00:00Z", "--to-offsets", "0:5"}, "same bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runApp(t, "", nil, append(base, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line naming %q", code, stderr, tc.want)
			}
		})
	}
}

// Records the worker's group has not committed yet are pending, not lost:
// a range that is only pending exits 0 and says so; the same range checked
// without the group (--group "") is lost records, exit 1.
func TestVerifyPendingExitsZero(t *testing.T) {
	k := testenv.Kafka(t)
	input := k.NewTopic(t, 2)
	output := input + ".out"
	k.CreateTopic(t, output, 2)
	cl := k.Client(t)
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: input, Value: []byte(`{"order_ref":"` + strconv.Itoa(i) + `"}`)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The worker's group has joined and committed its start, nothing more.
	group := input + "-g"
	var start kadm.Offsets
	start.Add(kadm.Offset{Topic: input, Partition: 0, At: 0, LeaderEpoch: -1})
	start.Add(kadm.Offset{Topic: input, Partition: 1, At: 0, LeaderEpoch: -1})
	if resp, err := k.Admin(t).CommitOffsets(context.Background(), group, start); err != nil || resp.Error() != nil {
		t.Fatalf("commit the group's start: %v %v", err, resp.Error())
	}
	args := []string{"verify", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", input, "--output-topic", output}
	stdout, stderr, code := runApp(t, "", nil, append(args, "--group", group)...)
	if code != 0 || !strings.Contains(stdout, "pending            100\n") || !strings.Contains(stdout, "lost               0\n") ||
		!strings.Contains(stdout, "note: 100 records are pending: the worker has not committed them yet (no fault; --wait waits for them)") {
		t.Fatalf("only pending: exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
	stdout, _, code = runApp(t, "", nil, append(args, "--group", "")...)
	if code != 1 || !strings.Contains(stdout, "lost               100\n") {
		t.Fatalf("without the group: exit %d:\n%s", code, stdout)
	}
}
