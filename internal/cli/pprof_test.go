package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/twmb/franz-go/pkg/kfake"
)

// status is the status code of GET url.
func status(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// run --pprof-addr serves Go's profiles on a listener of their own: the
// index, a named profile and a CPU profile, but not the command line
// (which would print every flag, passwords too). A port alone listens on
// 127.0.0.1. The metrics listener serves no profile, and the profiles'
// listener no metrics; without the flag there is no profile anywhere.
func TestPprof(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrRe := regexp.MustCompile(`msg="serving ([^"]*)" addr=(\S+)`)
	start := func(extra ...string) map[string]string {
		args := append([]string{"run", "--brokers", c.ListenAddrs()[0], "--sequencer", "memory", "--server-id", "1", "--worker-id", "1",
			"--input-topic", "in", "--output-topic", "out", "--dlq-topic", "", "--http-addr", "127.0.0.1:0"}, extra...)
		b := startApp(t, args...)
		want := 1 + len(extra)/2
		var m [][]string
		if !accounting.WaitFor(30*time.Second, func() bool { m = addrRe.FindAllStringSubmatch(b.stderr.String(), -1); return len(m) == want }) {
			t.Fatalf("not %d serving lines in 30s:\n%s", want, b.stderr.String())
		}
		served := map[string]string{}
		for _, l := range m {
			served[l[1]] = "http://" + l[2]
		}
		return served
	}

	served := start("--pprof-addr", ":0")
	base, metrics := served["/debug/pprof/"], served["/metrics, /healthz, /readyz"]
	if !strings.HasPrefix(base, "http://127.0.0.1:") || metrics == "" {
		t.Fatalf("serving %v; want the profiles on 127.0.0.1 for --pprof-addr :0, and the metrics", served)
	}
	if body := get(t, base+"/debug/pprof/"); !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Errorf("index lacks the goroutine and heap profiles:\n%.500s", body)
	}
	if body := get(t, base+"/debug/pprof/goroutine?debug=1"); !strings.Contains(body, "goroutine profile:") {
		t.Errorf("goroutine profile:\n%.500s", body)
	}
	if body := get(t, base+"/debug/pprof/profile?seconds=1"); !bytes.HasPrefix([]byte(body), []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile is not gzipped protobuf: % x", body[:min(len(body), 8)])
	}
	for _, url := range []string{base + "/debug/pprof/cmdline", base + "/metrics", metrics + "/debug/pprof/"} {
		if code := status(t, url); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", url, code)
		}
	}
	if body := get(t, metrics+"/metrics"); !strings.Contains(body, "flakestream_") {
		t.Errorf("/metrics lacks flakestream's metrics")
	}

	served = start()
	if code := status(t, served["/metrics, /healthz, /readyz"]+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("without --pprof-addr, GET /debug/pprof/ on --http-addr: %d, want 404", code)
	}
}

// The deprecated --pprof serves the profiles on the command's loopback
// address (not on --http-addr any more) and says so in a warning; a
// --pprof-addr given too wins.
func TestPprofDeprecated(t *testing.T) {
	for _, addr := range []string{legacyRunPprofAddr, legacyAuditPprofAddr} {
		if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
			t.Errorf("--pprof listens on %s, want 127.0.0.1", addr)
		}
	}
	for _, c := range []struct{ pprofAddr, want string }{{"", "127.0.0.1:"}, {"127.0.0.2:0", "127.0.0.2:"}} {
		var logs harness.SyncBuffer
		o := &opsConfig{pprof: true, pprofAddr: c.pprofAddr, pprofLegacyAddr: "127.0.0.1:0"}
		ctx, cancel := context.WithCancel(context.Background())
		if err := o.servePprof(ctx, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		cancel()
		out := logs.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "--pprof is deprecated") || !strings.Contains(out, `addr=`+c.want) {
			t.Errorf("--pprof with --pprof-addr %q: log\n%s\nwant a deprecation warning and the profiles on %s", c.pprofAddr, out, c.want)
		}
	}
}

func TestLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{"6060": "127.0.0.1:6060", ":6060": "127.0.0.1:6060", "0.0.0.0:6060": "0.0.0.0:6060", "[::1]:1": "[::1]:1", "pod:1": "pod:1"} {
		if got, err := loopbackByDefault(in); got != want || err != nil {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := loopbackByDefault("a:b:c"); err == nil {
		t.Errorf("a:b:c: no error")
	}
}
