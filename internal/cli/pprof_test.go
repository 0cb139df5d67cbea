package cli

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/twmb/franz-go/pkg/kfake"
)

// run --pprof serves Go's profiles beside /metrics on --http-addr: the
// index, a named profile and a CPU profile; without the flag, none of them.
func TestPprof(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrRe := regexp.MustCompile(`msg="serving ([^"]*)" addr=(\S+)`)
	start := func(pprof bool) (paths, base string) {
		args := []string{"run", "--brokers", c.ListenAddrs()[0], "--sequencer", "memory", "--server-id", "1", "--worker-id", "1",
			"--input-topic", "in", "--output-topic", "out", "--dlq-topic", "", "--http-addr", "127.0.0.1:0"}
		if pprof {
			args = append(args, "--pprof")
		}
		b := startApp(t, args...)
		var m []string
		if !accounting.WaitFor(30*time.Second, func() bool { m = addrRe.FindStringSubmatch(b.stderr.String()); return m != nil }) {
			t.Fatalf("no serving line in 30s:\n%s", b.stderr.String())
		}
		return m[1], "http://" + m[2]
	}

	paths, base := start(true)
	if !strings.Contains(paths, "/debug/pprof/") {
		t.Errorf("serving line names %q, want /debug/pprof/ among them", paths)
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
	if body := get(t, base+"/metrics"); !strings.Contains(body, "flakestream_") {
		t.Errorf("/metrics lacks flakestream's metrics beside the profiles")
	}

	paths, base = start(false)
	if strings.Contains(paths, "pprof") {
		t.Errorf("without --pprof the serving line names %q", paths)
	}
	res, err := http.Get(base + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("without --pprof, GET /debug/pprof/: %d, want 404", res.StatusCode)
	}
}
