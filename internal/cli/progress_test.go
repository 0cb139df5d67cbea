package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// terminal is a pseudo-terminal: tty is what the program under test writes
// to (term.IsTerminal says yes), and everything written is read back from
// the other side into out.
type terminal struct {
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	term := &terminal{tty: tty, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return // EIO once the tty side is closed
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); <-term.done; ptmx.Close() })
	return term
}

// output closes the terminal's writing side and returns all it showed.
func (term *terminal) output(t *testing.T) string {
	t.Helper()
	term.tty.Close()
	select {
	case <-term.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// logLine matches the start of a text log line.
var logLine = regexp.MustCompile(`time=\S+ level=`)

// checkLogLinesWhole fails if any log line in out does not start a line of
// its own on the terminal, or has anything but itself up to its newline:
// the property "log lines never cut into the bar". It returns how many log
// lines it checked.
func checkLogLinesWhole(t *testing.T, out string) int {
	t.Helper()
	locs := logLine.FindAllStringIndex(out, -1)
	for _, loc := range locs {
		if loc[0] > 0 && out[loc[0]-1] != '\n' && out[loc[0]-1] != '\r' {
			t.Errorf("a log line starts mid-line, after %q", out[max(0, loc[0]-60):loc[0]])
		}
		end := strings.IndexByte(out[loc[0]:], '\n')
		if end < 0 {
			end = len(out) - loc[0]
		}
		line := strings.TrimSuffix(out[loc[0]:loc[0]+end], "\r")
		if strings.ContainsAny(line, "\r\x1b") || strings.Contains(line, "█") || strings.Contains(line, "records/s") {
			t.Errorf("the bar cuts into the log line %q", line)
		}
	}
	return len(locs)
}

// On a terminal, log lines written while the bar is shown go above it,
// whole, and the bar is drawn again below them.
func TestProgressLogLinesAboveTheBar(t *testing.T) {
	term := newTerminal(t)
	p := newProgress(term.tty, "replay", time.Hour)
	p.throttle = 0 // draw on every update, so that every log line meets a bar
	log := slog.New(slog.NewTextHandler(p, nil))
	p.log = log
	for i := range 20 {
		p.update(int64(i*50), 1000)
		log.Info("something happened", "i", i)
	}
	p.finish(true)
	out := term.output(t)
	if n := checkLogLinesWhole(t, out); n != 20 {
		t.Errorf("%d log lines on the terminal, want 20:\n%q", n, out)
	}
	// The bar was drawn again after the log lines, and ends complete.
	if !strings.Contains(out, "(950/1000") || !strings.Contains(out, "100%") {
		t.Errorf("the bar was not drawn through to 100%%:\n%q", out)
	}
}

// screenLines are the lines a terminal shows for out: each line is what
// follows its last carriage return (the bar redraws over itself).
func screenLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// replayOnTerminal runs `flakestream replay` of e's input into its output
// in-process, with standard error on a pseudo-terminal, and returns the
// exit code and what the terminal showed.
func replayOnTerminal(t *testing.T, e *harness.Env, dlq string, extra ...string) (int, string) {
	t.Helper()
	term := newTerminal(t)
	app := App()
	app.Writer, app.ErrWriter = io.Discard, term.tty
	args := append([]string{"flakestream", "replay", "--brokers", strings.Join(e.Kafka.Addrs, ","),
		"--redis", e.Redis.URL, "--redis-prefix", e.Input, "--input-topic", e.Input, "--output-topic", e.Output,
		"--dlq-topic", dlq, "--server-id", "1", "--worker-id", "1"}, extra...)
	code := Run(context.Background(), app, args)
	return code, term.output(t)
}

// A replay that fails at start (here its DLQ topic does not exist) leaves
// its bar where it got, never drawn complete, and the error is the last
// line on the terminal.
func TestReplayFailureOnTerminal(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 2)
	e.Produce(t, 2000, orders.Mix{})
	code, out := replayOnTerminal(t, e, e.Input+".missing", "--topic-wait", "300ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if strings.Contains(out, "100%") || strings.Contains(out, "2000/2000") {
		t.Errorf("the failed replay's bar was drawn complete:\n%q", out)
	}
	if !strings.Contains(out, "(0/2000") {
		t.Errorf("no bar at 0 of 2000:\n%q", out)
	}
	lines := screenLines(out)
	want := "flakestream: replay: pipeline: topic does not exist: " + e.Input + ".missing"
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("the last line is not the error %q:\n%s", want, strings.Join(lines, "\n"))
	}
	checkLogLinesWhole(t, out)
}

// A replay that succeeds, logging at debug level all the while, draws its
// bar complete, and no log line is cut by it.
func TestReplayOnTerminal(t *testing.T) {
	e := harness.NewEnv(t, testenv.Kafka(t), testenv.RedisServer(t), 2)
	e.Produce(t, 5000, orders.Mix{})
	code, out := replayOnTerminal(t, e, e.DLQ, "--max-poll-records", "250", "--log-level", "debug")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "100%") || !strings.Contains(out, "(5000/5000") {
		t.Errorf("the bar was not drawn complete:\n%q", out)
	}
	if n := checkLogLinesWhole(t, out); n < 3 {
		t.Errorf("only %d log lines:\n%q", n, out)
	}
	lines := screenLines(out)
	if last := lines[len(lines)-1]; !strings.Contains(last, "replay complete") {
		t.Errorf("last line %q, want the replay complete log line", last)
	}
}
