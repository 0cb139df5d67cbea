package process_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

// replayArgs are the arguments of a replay of env's input into output.
func replayArgs(e *harness.Env, output string, extra ...string) []string {
	return append([]string{"replay", "--brokers", strings.Join(e.Kafka.Addrs, ","), "--redis", e.Redis.URL,
		"--redis-prefix", e.Input, "--input-topic", e.Input, "--output-topic", output, "--dlq-topic", output + ".dlq",
		"--server-id", "1", "--worker-id", "3", "--max-record-bytes", "65536", "--max-poll-records", "500",
		"--txn-timeout", "5s", "--progress-every", "200ms"}, extra...)
}

// A replay killed with SIGKILL mid-way and run again with the same
// arguments finishes, exactly once: every input record once in the output
// or its DLQ, nothing numbered twice. Its progress, without a terminal, is
// log lines with done, total, rate and ETA.
func TestReplayKilledAndResumed(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 3)
	e.Produce(t, 30000, orders.Mix{BadPerMille: 5, NumberedPerMille: 10})
	out := e.Input + ".replayed"
	e.Kafka.CreateTopic(t, out, 3)
	e.Kafka.CreateTopic(t, out+".dlq", 3)

	first := harness.Start(t, "replay 1", "", replayArgs(e, out)...)
	// Kill it once some of the range is committed, well before the end.
	adm := e.Kafka.Admin(t)
	if !accounting.WaitFor(60*time.Second, func() bool {
		offs, err := adm.ListEndOffsets(context.Background(), out)
		if err != nil {
			return false
		}
		var n int64
		offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n > 3000
	}) {
		t.Fatalf("the replay wrote nothing in 60s:\n%s", harness.Tail(first.Stderr.String(), 2000))
	}
	first.Kill()
	if !strings.Contains(first.Stderr.String(), "replay progress") {
		t.Fatalf("no progress lines before the kill:\n%s", harness.Tail(first.Stderr.String(), 2000))
	}

	second := harness.Start(t, "replay 2", "", replayArgs(e, out)...)
	second.WaitSuccess(t, 120*time.Second)
	log := second.Stderr.String()
	for _, want := range []string{"replay progress", "done=", "total=30000", "records_per_sec=", "eta=", "replay complete"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the resumed replay's log lacks %q:\n%s", want, harness.Tail(log, 2000))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outRecs, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := accounting.Check(e.Codec, e.Inputs(), outRecs, dlq)
	if !rep.OK() {
		t.Fatalf("killed and resumed replay is not exactly once: %s", rep)
	}
	t.Logf("killed mid-way and resumed: %s", rep)

	// A third run of the same command has nothing left to do.
	third := harness.Start(t, "replay 3", "", replayArgs(e, out)...)
	third.WaitSuccess(t, 60*time.Second)
	again, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out)
	if err != nil || len(again) != len(outRecs) {
		t.Fatalf("a rerun of a finished replay wrote more: %d records, was %d (%v)", len(again), len(outRecs), err)
	}
}

// SIGINT stops a replay mid-way: it exits 130 with one line saying how to
// resume, and the same command run again finishes the range, exactly once.
func TestReplaySIGINTExits130AndResumes(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 2)
	e.Produce(t, 20000, orders.Mix{})
	out := e.Input + ".replayed"
	e.Kafka.CreateTopic(t, out, 2)
	e.Kafka.CreateTopic(t, out+".dlq", 2)
	// Ten records a transaction: thousands of transactions, so the signal
	// comes long before the end.
	args := replayArgs(e, out, "--max-poll-records", "10")
	first := harness.Start(t, "replay 1", "", args...)
	adm := e.Kafka.Admin(t)
	if !accounting.WaitFor(60*time.Second, func() bool {
		offs, err := adm.ListEndOffsets(context.Background(), out)
		if err != nil {
			return false
		}
		var n int64
		offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n > 0
	}) {
		t.Fatalf("the replay wrote nothing in 60s:\n%s", harness.Tail(first.Stderr.String(), 2000))
	}
	_ = first.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-first.Done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the replay did not exit within 60s of SIGINT:\n%s", harness.Tail(first.Stderr.String(), 2000))
	}
	if code := first.Cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130:\n%s", code, harness.Tail(first.Stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(first.Stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "flakestream: replay interrupted at ") || !strings.Contains(last, "of 20000 records; run the same command again to resume") {
		t.Fatalf("last line %q, want how to resume", last)
	}

	second := harness.Start(t, "replay 2", "", replayArgs(e, out)...)
	second.WaitSuccess(t, 120*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outRecs, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, out+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	if rep := accounting.Check(e.Codec, e.Inputs(), outRecs, dlq); !rep.OK() {
		t.Fatalf("interrupted and resumed replay is not exactly once: %s", rep)
	}
}
