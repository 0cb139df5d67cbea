package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/test/harness"
)

// runApp runs flakestream in-process, as main does but without exiting:
// args after the program name, stdin, and env set with t.Setenv for the
// test (so tests that use it are not parallel). It returns standard
// output, standard error and the exit code.
func runApp(t testing.TB, stdin string, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runAppContext(context.Background(), t, stdin, env, args...)
}

func runAppContext(ctx context.Context, t testing.TB, stdin string, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	for k, v := range env {
		if tt, ok := t.(*testing.T); ok {
			tt.Setenv(k, v)
		} else {
			t.Fatalf("runApp: env needs a *testing.T")
		}
	}
	var o, e bytes.Buffer
	app := App()
	app.Reader, app.Writer, app.ErrWriter = strings.NewReader(stdin), &o, &e
	code = Run(ctx, app, append([]string{"flakestream"}, args...))
	return o.String(), e.String(), code
}

func TestDecodeOriginExample(t *testing.T) {
	out, errOut, code := runApp(t, "", nil, "decode", "--json", "229710323916801")
	want := `{"id":"229710323916801","unix_ms":1636701167209,"time":"2021-11-12T07:12:47.209Z","elapsed_ms":54767209,"server":1,"worker":2,"sequence":1}` + "\n"
	if out != want || code != 0 {
		t.Fatalf("decode --json = %q (exit %d, stderr %q), want %q", out, code, errOut, want)
	}
}

// Bad IDs are reported on stderr; the others are still decoded, and the
// command exits 1.
func TestDecodeBadIDs(t *testing.T) {
	out, errOut, code := runApp(t, "", nil, "decode", "--json", "1", "abc", "-5", "9223372036854775808", "229710323916801")
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
	out, errOut, code := runApp(t, "", nil, "gen", "--sequencer", "memory", "--count", "1000", "--server-id", "3", "--worker-id", "4")
	if code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errOut)
	}
	dec, errOut, code := runApp(t, out, nil, "decode", "--json")
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
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default", nil, nil, "41/5/5/12"},
		{"file", nil, []string{"--config", cfg}, "40/4/6/13"},
		{"env over file", map[string]string{"FLAKESTREAM_SERVER_BITS": "5", "FLAKESTREAM_WORKER_BITS": "5"}, []string{"--config", cfg}, "40/5/5/13"},
		{"flag over env", map[string]string{"FLAKESTREAM_SERVER_BITS": "5", "FLAKESTREAM_WORKER_BITS": "5"}, []string{"--config", cfg, "--server-bits", "3", "--worker-bits", "7"}, "40/3/7/13"},
		{"config from env", map[string]string{"FLAKESTREAM_CONFIG": cfg}, nil, "40/4/6/13"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runApp(t, "", c.env, append([]string{"layout", "--json"}, c.args...)...)
			if code != 0 {
				t.Fatalf("layout %v: exit %d: %s", c.args, code, errOut)
			}
			var l struct{ Layout string }
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(l.Layout, "@")[0]; got != c.want {
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
		{[]string{"gen", "--count", "0"}, 2, "flakestream: --count 0: want at least 1\n"},
		{[]string{"run", "--input-topic", "in", "--output-topic", "out"}, 2, "flakestream: --server-id is required (or FLAKESTREAM_SERVER_ID, or server-id: in --config): every running instance group needs its own\n"},
		{[]string{"run", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error"}, 2, "flakestream: --input-topic and --output-topic are required\n"},
		{[]string{"run", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error", "--input-topic", "in", "--output-topic", "out", "--sasl-mechanism", "gssapi"}, 2, "flakestream: --sasl-mechanism \"gssapi\": want plain, scram-sha-256, scram-sha-512, oauthbearer or aws_msk_iam\n"},
		{[]string{"run", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error", "--input-topic", "in", "--output-topic", "out", "--http-addr", "", "--pprof-addr", "a:b:c"}, 2, "flakestream: --pprof-addr \"a:b:c\": address a:b:c: too many colons in address\n"},
		{[]string{"run", "--server-id", "1", "--worker-id", "1", "--sequencer", "memory", "--log-level", "error", "--input-topic", "in", "--output-topic", "out", "--http-addr", "", "--idempotency-number-index"}, 2, "flakestream: --idempotency-number-index needs --idempotency-key: the index keeps each number's idempotency key\n"},
		{[]string{"run", "--log-level", "loud"}, 2, "flakestream: --log-level \"loud\": want trace, debug, info, warn or error\n"},
		{[]string{"replay", "--input-topic", "in"}, 2, "flakestream: --input-topic and --output-topic are required\n"},
		{[]string{"replay", "--input-topic", "in", "--output-topic", "out", "--from", "soon"}, 2, "flakestream: --from: "},
		{[]string{"demo", "--orders", "0"}, 2, "flakestream: --orders and --partitions must be at least 1\n"},
		{[]string{"layout", "--config", "/nonexistent/flakestream.yaml"}, 1, "flakestream: config file: open /nonexistent/flakestream.yaml: no such file or directory\n"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errOut, code := runApp(t, "", nil, c.args...)
			ok := errOut == c.want
			if !strings.HasSuffix(c.want, "\n") { // a prefix; the rest is the cause
				ok = strings.HasPrefix(errOut, c.want) && strings.Count(errOut, "\n") == 1
			}
			if code != c.code || !ok {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut, c.code, c.want)
			}
		})
	}
}

// background is flakestream running in-process on its own goroutine, as a
// process test would run the binary.
type background struct {
	stdout *harness.SyncBuffer
	stderr *harness.SyncBuffer
	cancel context.CancelFunc
	done   chan int // the exit code, once
}

// startApp starts flakestream in-process with args; the test's end stops
// it if the test has not.
func startApp(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{stdout: &harness.SyncBuffer{}, stderr: &harness.SyncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	app := App()
	app.Reader, app.Writer, app.ErrWriter = strings.NewReader(""), b.stdout, b.stderr
	go func() { b.done <- Run(ctx, app, append([]string{"flakestream"}, args...)) }()
	t.Cleanup(func() {
		if _, err := b.stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return b
}

// stop cancels the app's context, as main does on the first SIGTERM, and
// waits up to timeout for its exit code.
func (b *background) stop(timeout time.Duration) (int, error) {
	b.cancel()
	select {
	case code, ok := <-b.done:
		if !ok {
			return 0, nil // stopped already
		}
		close(b.done)
		return code, nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("flakestream did not return within %s of its context's end:\n%s", timeout, harness.Tail(b.stderr.String(), 2000))
	}
}

// The packages below the CLI name no flags; Run adds the flag that fixes
// an error, found with errors.Is and errors.As however deep it is wrapped.
func TestHint(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("audit: %w", fmt.Errorf("%w: orders.audit", eos.ErrMissingTopic)), " (create it, or pass --create-topics)"},
		{fmt.Errorf("%w: %w: %w", eos.ErrFatal, eos.ErrListTopics, errors.New("dial tcp: refused")), " (check --brokers, the TLS and SASL settings, and that the brokers are up)"},
		{fmt.Errorf("number: %w", &schema.RegistryError{Op: "fetch schema id 7", StatusCode: 401, Err: errors.New("unauthorized")}), " (check --schema-registry and its credentials)"},
		{&schema.RegistryError{Op: "fetch schema id 7", StatusCode: 503, Err: errors.New("unavailable")}, ""}, // retried, not the flags' fault
		{fmt.Errorf("%w: not authorized", eos.ErrFatal), ""},
		{fmt.Errorf("%w: %w", eos.ErrFatal, &eos.SharedIDError{TransactionalID: "flakestream-g-h", InstanceID: "h", Fences: 5, Window: 30 * time.Second}),
			" (give each running process its own --instance-id; it defaults to the host name, which two processes on one host share)"},
		{&eos.SharedIDError{TransactionalID: "mine", Fences: 5, Window: 30 * time.Second}, " (give each running process its own --transactional-id)"},
	} {
		if got := hint(c.err); got != c.want {
			t.Errorf("hint(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
