package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flakestream/flakestream/internal/e2e"
	"github.com/flakestream/flakestream/internal/testenv"
)

// binary builds flakestream once per test run, for tests that run it as a
// separate process (several at once, or killed with SIGKILL).
func binary(t testing.TB) string { return e2e.Binary(t) }

// runCLI runs the binary with args and optional stdin and environment.
func runCLI(t testing.TB, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestDecodeOriginExample(t *testing.T) {
	out, errOut, code := runCLI(t, "", nil, "decode", "--json", "229710323916801")
	want := `{"id":"229710323916801","unix_ms":1636701167209,"time":"2021-11-12T07:12:47.209Z","elapsed_ms":54767209,"server":1,"worker":2,"sequence":1}` + "\n"
	if out != want || code != 0 {
		t.Fatalf("decode --json = %q (exit %d, stderr %q), want %q", out, code, errOut, want)
	}
}

// Bad IDs are reported on stderr; the others are still decoded, and the
// command exits 1.
func TestDecodeBadIDs(t *testing.T) {
	out, errOut, code := runCLI(t, "", nil, "decode", "--json", "1", "abc", "-5", "9223372036854775808", "229710323916801")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("decoded %d lines, want 2:\n%s", n, out)
	}
	for _, want := range []string{`decode "abc": number is not a decimal integer`, `decode "-5": number is negative`, `decode "9223372036854775808": number is above 2^63-1`, "3 of 5 IDs"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestGenPipesIntoDecode(t *testing.T) {
	out, errOut, code := runCLI(t, "", nil, "gen", "--sequencer", "memory", "--count", "1000", "--server-id", "3", "--worker-id", "4")
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errOut)
	}
	dec, errOut, code := runCLI(t, out, nil, "decode", "--json")
	if code != 0 {
		t.Fatalf("decode: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(dec), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d decoded lines, want 1000", len(lines))
	}
	for _, l := range lines {
		var d struct{ Server, Worker int }
		if err := json.Unmarshal([]byte(l), &d); err != nil || d.Server != 3 || d.Worker != 4 {
			t.Fatalf("line %s: %+v %v", l, d, err)
		}
	}
}

// Flags beat FLAKESTREAM_* variables, which beat the --config file, which
// beats the defaults.
func TestConfigPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfg, []byte("time-bits: 40\nsequence-bits: 13\nserver-bits: 4\nworker-bits: 6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	layout := func(env []string, args ...string) string {
		out, errOut, code := runCLI(t, "", env, append([]string{"layout", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("layout %v: exit %d: %s", args, code, errOut)
		}
		var l struct{ Layout string }
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		return strings.Split(l.Layout, "@")[0]
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"default", nil, nil, "41/5/5/12"},
		{"file", nil, []string{"--config", cfg}, "40/4/6/13"},
		{"env over file", []string{"FLAKESTREAM_SERVER_BITS=5", "FLAKESTREAM_WORKER_BITS=5"}, []string{"--config", cfg}, "40/5/5/13"},
		{"flag over env", []string{"FLAKESTREAM_SERVER_BITS=5", "FLAKESTREAM_WORKER_BITS=5"}, []string{"--config", cfg, "--server-bits", "3", "--worker-bits", "7"}, "40/3/7/13"},
		{"config from env", []string{"FLAKESTREAM_CONFIG=" + cfg}, nil, "40/4/6/13"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := layout(c.env, c.args...); got != c.want {
				t.Fatalf("layout = %s, want %s", got, c.want)
			}
		})
	}
}

func TestUserErrorsAreOneLine(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"gen", "--sequencer", "memory", "--server-id", "40"}, 1, "flakestream: server id 40 does not fit in 5 bits (max 31)\n"},
		{[]string{"layout", "--time-bits", "42"}, 1, "flakestream: layout: idgen: bit widths must add up to 63: 42+5+5+12 = 64 (time+server+worker+sequence)\n"},
		{[]string{"layout", "--epoch", "yesterday"}, 1, "flakestream: --epoch \"yesterday\" is neither RFC 3339 (2021-11-12T00:00:00+08:00) nor Unix milliseconds\n"},
		{[]string{"gen", "--bogus"}, 2, "flakestream: flag provided but not defined: -bogus (see --help)\n"},
		{[]string{"gen", "--sequencer", "paper"}, 2, "flakestream: --sequencer \"paper\": want redis or memory\n"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, "", nil, c.args...)
			if code != c.code || errOut != c.want {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut, c.code, c.want)
			}
		})
	}
}

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
