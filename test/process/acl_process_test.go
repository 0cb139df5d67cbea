package process_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// On a secured broker, `flakestream run` holds exactly the run rows of
// docs/security.md's ACL table. Each row in turn is revoked mid-run: the
// worker exits 1 within a bound, and its last line names the principal,
// the resource, the operation and the kafka-acls command that grants it
// back (no endless retry). Granted again, a new worker finishes the input:
// exactly once, nothing lost or duplicated.
func TestWorkerRevokedACLEndsWithOneLine(t *testing.T) {
	k := testenv.RealKafka(t, testenv.KafkaSecured(testenv.ClientAuthRequired))
	redis := testenv.RedisServer(t)
	var rows []testenv.ACLRow
	for _, r := range testenv.ACLTable(t) {
		if r.Command == "run" {
			rows = append(rows, r)
		}
	}
	for _, row := range rows {
		t.Run(row.Resource+"-"+strings.NewReplacer("<", "", ">", "").Replace(row.Name), func(t *testing.T) {
			e := harness.NewEnv(t, k, redis, 2)
			user, pw := k.CreateUser(t, "worker")
			values := map[string]string{"input": e.Input, "output": e.Output, "dlq": e.DLQ, "group": e.Group}
			k.GrantCommand(t, user, "run", values)
			args := k.Secure().CLIArgs(user, pw)
			e.Produce(t, 2000, orders.Mix{BadPerMille: 20})
			w := e.StartWorker(t, "a", args...)
			if _, ok := e.WaitCommitted(t, 90*time.Second); !ok {
				t.Fatalf("the worker committed nothing with the table's rights:\n%s", harness.Tail(w.Stderr.String(), 3000))
			}
			if n := k.RevokeRow(t, user, row, values); n == 0 {
				t.Fatalf("revoked nothing for %+v", row)
			}
			revoked := time.Now()
			// More input, bad records among it (the DLQ is written to).
			e.Produce(t, 2000, orders.Mix{BadPerMille: 20})
			select {
			case <-w.Done:
			case <-time.After(120 * time.Second):
				t.Fatalf("the worker still runs 120s after %s %s was revoked:\n%s", row.Resource, row.Name, harness.Tail(w.Stderr.String(), 3000))
			}
			line := lastLine(w.Stderr.String())
			t.Logf("exit %v %s after the revocation: %s", w.Err, time.Since(revoked).Round(100*time.Millisecond), line)
			if code := w.Cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			for _, want := range []string{"flakestream: ", "User:" + user, "kafka-acls.sh", "--allow-principal User:" + user} {
				if !strings.Contains(line, want) {
					t.Errorf("the last line lacks %q: %s", want, line)
				}
			}

			k.GrantCommand(t, user, "run", values)
			grantedAt := time.Now()
			again := e.StartWorker(t, "a", args...)
			rep := e.Check(t, 120*time.Second)
			if !rep.OK() {
				t.Fatalf("after the right was granted again: %s\n%s", rep, harness.Tail(again.Stderr.String(), 3000))
			}
			t.Logf("granted again: caught up in %s: %s", time.Since(grantedAt).Round(100*time.Millisecond), rep)
			if err := again.Stop(30 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
