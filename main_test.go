package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// The tests of this package run flakestream as separate processes: several
// at once, or killed with SIGKILL. Everything else is tested in-process in
// internal/cli.

func TestMain(m *testing.M) { harness.Main(m) }

// binary builds flakestream once per test run.
func binary(t testing.TB) string { return harness.Binary(t) }

// Four gen processes started at once against one Redis, with the same
// server and worker, print 400,000 unique numbers, each process's output
// strictly increasing.
func TestGenFourProcessesShareOneRedis(t *testing.T) {
	r := testenv.RedisServer(t)
	bin := binary(t)
	prefix := "gen4-" + strconv.Itoa(os.Getpid())
	outs := make([]bytes.Buffer, 4)
	cmds := make([]*exec.Cmd, 4)
	for i := range cmds {
		cmds[i] = exec.Command(bin, "gen", "--count", "100000", "--redis", r.URL, "--redis-prefix", prefix, "--server-id", "1", "--worker-id", "1")
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = os.Stderr
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[int64]struct{}, 400000)
	for i := range outs {
		var last int64 = -1
		lines := strings.Fields(outs[i].String())
		if len(lines) != 100000 {
			t.Fatalf("process %d printed %d numbers", i, len(lines))
		}
		for _, l := range lines {
			id, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("process %d: %d after %d", i, id, last)
			}
			last = id
			seen[id] = struct{}{}
		}
	}
	if len(seen) != 400000 {
		t.Fatalf("%d unique numbers of 400000", len(seen))
	}
}
