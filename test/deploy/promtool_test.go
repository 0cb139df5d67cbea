package deploy_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/flakestream/flakestream/test/testenv"
)

// promtool returns the path of promtool, or skips the test (fails it under
// CI=true, where .ci/run installs Debian's prometheus package).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "no promtool on PATH (apt-get install prometheus)")
	}
	return p
}

// TestPromtool runs what `make test-rules` runs: promtool's check of the
// rules and of the docker-compose Prometheus configuration, and the rule
// unit tests (every alert fires on its input series, and only there).
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, c := range []struct {
		dir  string
		args []string
		want string
	}{
		{".", []string{"check", "rules", rulesPath}, "SUCCESS"},
		{"prometheus", []string{"check", "config", "prometheus.yml"}, "SUCCESS"},
		{"prometheus", []string{"test", "rules", "flakestream-rules.test.yml"}, "SUCCESS"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = c.dir
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("promtool %s: %v\n%s", strings.Join(c.args, " "), err, out)
			continue
		}
		t.Logf("promtool %s:\n%s", strings.Join(c.args, " "), out)
	}
}
