package cli

import (
	"testing"

	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// A fatal error (here: the output topic does not exist) ends run with one
// clear line and exit code 1.
func TestRunFatalErrorIsOneLine(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 1)
	args := append(e.WorkerArgs("x"), "--output-topic", e.Input+".missing", "--log-level", "error", "--topic-wait", "300ms")
	_, stderr, code := runApp(t, "", nil, args...)
	want := "flakestream: pipeline: topic does not exist: " + e.Input + ".missing (create it, or pass --create-topics)\n"
	if code != 1 || stderr != want {
		t.Fatalf("exit %d, stderr %q; want 1, %q", code, stderr, want)
	}
}
