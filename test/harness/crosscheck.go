package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	pverify "github.com/flakestream/flakestream/verify"
)

// VerifyProcess runs `flakestream verify --json` on the env's topics as a
// user would after the run, as a process of the binary, and returns its
// counts. Exit 0 and 1 are reports (exact or not); anything else, or
// output that is not its JSON, is an error.
func (e *Env) VerifyProcess(t testing.TB, timeout time.Duration) (pverify.Report, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"verify", "--brokers", strings.Join(e.Kafka.Addrs, ","), "--input-topic", e.Input, "--output-topic", e.Output,
		"--dlq-topic", e.DLQ, "--max-record-bytes", fmt.Sprint(MaxRecordBytes), "--json", "--log-level", "warn"}
	args = append(args, e.VerifyArgs...)
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return pverify.Report{}, fmt.Errorf("flakestream verify on %s: %w: %s", e.Output, err, Tail(stderr.String(), 1000))
	}
	var c pverify.Report
	if err := json.Unmarshal(stdout.Bytes(), &c); err != nil {
		return c, fmt.Errorf("flakestream verify printed %q: %w", Tail(stdout.String(), 500), err)
	}
	if (err == nil) != c.Exact {
		return c, fmt.Errorf("flakestream verify: exact %t but exit status %v", c.Exact, err)
	}
	return c, nil
}

// Disagreements lists where verify's counts c differ from the suite's own
// accounting rep of the same topics; none means they agree.
func Disagreements(c pverify.Counts, rep accounting.Report) []string {
	var out []string
	check := func(what string, got, want int) {
		if got != want {
			out = append(out, fmt.Sprintf("%s: verify %d, suite %d", what, got, want))
		}
	}
	check("input", int(c.Input), rep.In)
	check("lost", int(c.Lost), rep.Lost)
	check("duplicated", int(c.Duplicated), rep.Duplicated)
	check("renumbered", int(c.Renumbered), rep.Renumbered)
	check("duplicate_numbers", int(c.DuplicateNumbers), rep.Reissued)
	check("unattributed", int(c.Unattributed+c.OutsideRange), rep.Unattributed)
	if rep.Duplicated == 0 {
		// With no copy twice, every output record is one input's fate.
		check("numbered+passthrough", int(c.Numbered+c.Passthrough), rep.Numbered+rep.Passthrough)
		check("dead_lettered", int(c.DeadLettered), rep.DLQ)
	}
	if c.Exact != (c.Lost == 0 && c.Duplicated == 0 && c.Renumbered == 0 && c.DuplicateNumbers == 0 && c.Unattributed == 0 && c.InvalidNumbers == 0) {
		out = append(out, "exact does not follow from the counts")
	}
	return out
}
