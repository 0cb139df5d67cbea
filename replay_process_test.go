package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/e2e"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/internal/testenv"
	"github.com/flakestream/flakestream/internal/verify"
	"github.com/twmb/franz-go/pkg/kadm"
)

// replayArgs are the arguments of a replay of env's input into output.
func replayArgs(e *e2e.Env, output string, extra ...string) []string {
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
	e := e2e.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 3)
	e.Produce(t, 30000, orders.Mix{BadPerMille: 5, NumberedPerMille: 10})
	out := e.Input + ".replayed"
	e.Kafka.CreateTopic(t, out, 3)
	e.Kafka.CreateTopic(t, out+".dlq", 3)

	first := e2e.Start(t, "replay 1", "", replayArgs(e, out)...)
	// Kill it once some of the range is committed, well before the end.
	adm := e.Kafka.Admin(t)
	if !verify.WaitFor(60*time.Second, func() bool {
		offs, err := adm.ListEndOffsets(context.Background(), out)
		if err != nil {
			return false
		}
		var n int64
		offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n > 3000
	}) {
		t.Fatalf("the replay wrote nothing in 60s:\n%s", e2e.Tail(first.Stderr.String(), 2000))
	}
	first.Kill()
	if !strings.Contains(first.Stderr.String(), "replay progress") {
		t.Fatalf("no progress lines before the kill:\n%s", e2e.Tail(first.Stderr.String(), 2000))
	}

	second := e2e.Start(t, "replay 2", "", replayArgs(e, out)...)
	second.WaitSuccess(t, 120*time.Second)
	log := second.Stderr.String()
	for _, want := range []string{"replay progress", "done=", "total=30000", "records_per_sec=", "eta=", "replay complete"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the resumed replay's log lacks %q:\n%s", want, e2e.Tail(log, 2000))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outRecs, err := verify.ReadCommitted(ctx, e.Kafka.Addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := verify.ReadCommitted(ctx, e.Kafka.Addrs, out+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := verify.Check(e.Codec, e.Inputs(), outRecs, dlq)
	if !rep.OK() {
		t.Fatalf("killed and resumed replay is not exactly once: %s", rep)
	}
	t.Logf("killed mid-way and resumed: %s", rep)

	// A third run of the same command has nothing left to do.
	third := e2e.Start(t, "replay 3", "", replayArgs(e, out)...)
	third.WaitSuccess(t, 60*time.Second)
	again, err := verify.ReadCommitted(ctx, e.Kafka.Addrs, out)
	if err != nil || len(again) != len(outRecs) {
		t.Fatalf("a rerun of a finished replay wrote more: %d records, was %d (%v)", len(again), len(outRecs), err)
	}
}
