package process_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
)

// Two worker processes started with the same --instance-id share a
// transactional ID and fence each other in turn. They are told apart from
// a fence that merely happens: one of them ends with exit 1 and one line
// naming the transactional ID and --instance-id, the other carries on, and
// the output is exactly once.
func TestTwoWorkersOneInstanceID(t *testing.T) {
	e := newProcessEnv(t, 4)
	// A steady stream, so that both keep starting transactions (and
	// fencing each other) until one of them ends.
	stream := e.StartStream(t, harness.StreamConfig{Records: 60000, Rate: 1000, Mix: orders.Mix{}})
	args := []string{"--max-poll-records", "200", "--log-level", "info"}
	a := e.StartWorker(t, "twin", args...)
	b := e.StartWorker(t, "twin", args...)
	started := time.Now()
	var ended, other *harness.Process
	select {
	case <-a.Done:
		ended, other = a, b
	case <-b.Done:
		ended, other = b, a
	case <-time.After(4 * time.Minute):
		t.Fatalf("neither worker ended in 4m; a:\n%s\nb:\n%s", harness.Tail(a.Stderr.String(), 2000), harness.Tail(b.Stderr.String(), 2000))
	}
	t.Logf("%s ended after %s", ended.Name, time.Since(started).Round(time.Second))
	if code := ended.Cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("%s exited %d, want 1:\n%s", ended.Name, code, harness.Tail(ended.Stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(ended.Stderr.String()), "\n")
	last := lines[len(lines)-1]
	txnID := regexp.QuoteMeta(`transactional ID "flakestream-` + e.Group + `-twin"`)
	if !regexp.MustCompile(`^flakestream: .*` + txnID + `.* was fenced \d+ times within .*--instance-id`).MatchString(last) {
		t.Fatalf("last line %q: want one line naming the transactional ID and --instance-id", last)
	}
	if other.Exited() {
		t.Fatalf("both workers ended; the other:\n%s", harness.Tail(other.Stderr.String(), 2000))
	}
	stream.Wait(t, 3*time.Minute)
	if rep := e.Check(t, 3*time.Minute); !rep.OK() {
		t.Fatalf("after two workers on one transactional ID: %s", rep)
	}
}
