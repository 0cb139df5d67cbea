package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

// replayCLIArgs are a replay of e's input into e's output and DLQ.
func replayCLIArgs(e *harness.Env, extra ...string) []string {
	return append([]string{"replay", "--brokers", strings.Join(e.Kafka.Addrs, ","), "--redis", e.Redis.URL,
		"--redis-prefix", e.Input, "--input-topic", e.Input, "--output-topic", e.Output, "--dlq-topic", e.DLQ,
		"--server-id", "1", "--worker-id", "1", "--txn-timeout", "5s", "--log-level", "warn"}, extra...)
}

// outputOffsets is the sum of the end offsets of topic.
func outputOffsets(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// With partition:offset bounds only the partitions named are replayed: a
// dry run says so and produces nothing, and the replay numbers exactly the
// records of the range. --all-partitions would cover the others too.
func TestReplayNamedPartitionsOnly(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 4)
	e.Produce(t, 4000, orders.Mix{})
	adm := e.Kafka.Admin(t)
	ends, err := adm.ListEndOffsets(context.Background(), e.Input)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(e.Input, 0); o.Offset < 600 {
		t.Fatalf("partition 0 holds %d records, the test needs 600", o.Offset)
	}

	out, errOut, code := runApp(t, "", nil, replayCLIArgs(e, "--from", "0:100", "--to", "0:600", "--dry-run")...)
	if code != 0 {
		t.Fatalf("--dry-run: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"(dry run: nothing is produced)\n", "partition 0: offsets 100 to 600: 500 records\n",
		"total: 1 partitions, 500 records\n", "not replayed: partitions 1, 2, 3 (not listed in --from or --to; --all-partitions replays them)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, out)
		}
	}
	if n := outputOffsets(t, adm, e.Output) + outputOffsets(t, adm, e.DLQ); n != 0 {
		t.Fatalf("the dry run produced: %d offsets in the output and DLQ", n)
	}

	all, errOut, code := runApp(t, "", nil, replayCLIArgs(e, "--from", "0:100", "--to", "0:600", "--all-partitions", "--dry-run")...)
	if code != 0 || !strings.Contains(all, "total: 4 partitions, ") || strings.Contains(all, "not replayed") {
		t.Fatalf("--all-partitions --dry-run: exit %d, want 4 partitions:\n%s%s", code, all, errOut)
	}

	if _, errOut, code := runApp(t, "", nil, replayCLIArgs(e, "--from", "0:100", "--to", "0:600")...); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.Output, e.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 500 {
		t.Fatalf("replayed %d records, want the 500 of partition 0's [100, 600)", len(recs))
	}
	for _, r := range recs {
		src, _ := accounting.Header(r, codec.HeaderSource)
		if _, p, o, err := codec.ParseSource(src); err != nil || p != 0 || o < 100 || o >= 600 {
			t.Fatalf("record from %q, outside partition 0's [100, 600)", src)
		}
	}

	// The same dry run now shows the replay done.
	out, _, _ = runApp(t, "", nil, replayCLIArgs(e, "--from", "0:100", "--to", "0:600", "--dry-run")...)
	if !strings.Contains(out, "partition 0: offsets 100 to 600: 500 records, 500 already done\n") {
		t.Errorf("the dry run after the replay does not show it done:\n%s", out)
	}
}

// A replay stopped by a signal exits 130 and says how to resume, wherever
// it was stopped: here while it waits for an output topic to be created.
func TestReplayInterruptedExits130(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 2)
	e.Produce(t, 100, orders.Mix{})
	args := replayCLIArgs(e, "--output-topic", e.Input+".not-yet", "--topic-wait", "10m", "--log-level", "info")
	b := startApp(t, args...)
	if !accounting.WaitFor(60*time.Second, func() bool { return strings.Contains(b.stderr.String(), "not-yet") }) {
		t.Fatalf("the replay never waited for its output topic:\n%s", b.stderr.String())
	}
	code, err := b.stop(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.stderr.String()), "\n")
	last := lines[len(lines)-1]
	// How far it got depends on when the signal came (before or after the
	// range was resolved); what must hold is the exit code and the line.
	if code != 130 || !regexp.MustCompile(`replay interrupted at \d+ of \d+ records; run the same command again to resume \(replay flakestream-replay-`).MatchString(last) {
		t.Fatalf("exit %d, last line %q; want 130 and how to resume", code, last)
	}
}
