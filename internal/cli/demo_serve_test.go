package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/browsertest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the live page's screenshot to docs/demo-serve.png")

// serveURLs are the addresses `demo --serve` prints.
type serveURLs struct{ page, auditMetrics, workerMetrics string }

// startServe starts `demo --serve` on free ports with extra flags and
// returns it with the URLs it printed.
func startServe(t *testing.T, extra ...string) (*background, serveURLs) {
	t.Helper()
	b := startApp(t, append([]string{"demo", "--serve", "--http-addr", "127.0.0.1:0", "--audit-http-addr", "127.0.0.1:0"}, extra...)...)
	re := regexp.MustCompile(`live page +(http://\S+)\n +audit metrics +(http://\S+)\n +worker metrics +(http://\S+)\n`)
	var m []string
	if !accounting.WaitFor(30*time.Second, func() bool { m = re.FindStringSubmatch(b.stdout.String()); return m != nil }) {
		t.Fatalf("no URLs printed in 30s; stdout:\n%s\nstderr:\n%s", b.stdout.String(), b.stderr.String())
	}
	return b, serveURLs{m[1], m[2], m[3]}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(body)
}

// metric returns the value of the series line that starts with series
// (name and labels, exactly as exposed), or -1 if there is none.
func metric(exposition, series string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func audited(t *testing.T, u serveURLs) int64 {
	t.Helper()
	var sum struct{ Audited int64 }
	if err := json.Unmarshal([]byte(get(t, u.page+"api/summary")), &sum); err != nil {
		t.Fatal(err)
	}
	return sum.Audited
}

// `demo --serve` serves the live page and both /metrics while orders
// flow (every dead-letter class among them), and the first signal stops
// it with the accounting: exactly once, no anomaly.
func TestDemoServe(t *testing.T) {
	b, u := startServe(t, "--rate", "1000", "--partitions", "4")
	if page := get(t, u.page); !strings.Contains(page, "<title>flakestream audit</title>") {
		t.Fatalf("the live page at %s is not the audit page:\n%.500s", u.page, page)
	}
	// The waits below are hang guards, not a pace: a loaded machine
	// under the race detector takes its time to start.
	var first int64
	if !accounting.WaitFor(2*time.Minute, func() bool { first = audited(t, u); return first > 0 }) {
		t.Fatalf("nothing audited in 2 min")
	}
	if !accounting.WaitFor(2*time.Minute, func() bool { return audited(t, u) > first }) {
		t.Fatalf("the audited count stayed at %d", first)
	}
	// One order in a thousand is malformed, each class in turn: at 1,000
	// a second every class has come by within 6 s.
	classes := []string{"not_json", "not_object", "invalid_utf8", "invalid_number", "duplicate_field", "too_large"}
	var wm string
	if !accounting.WaitFor(2*time.Minute, func() bool {
		wm = get(t, u.workerMetrics)
		for _, c := range classes {
			if metric(wm, `flakestream_dlq_records_total{class="`+c+`"}`) < 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not every dead-letter class on the worker's /metrics in 2 min:\n%s", grepLines(wm, "dlq"))
	}
	if n := metric(wm, "flakestream_records_numbered_total"); n <= 0 {
		t.Fatalf("flakestream_records_numbered_total = %v on the worker's /metrics", n)
	}
	a1 := metric(get(t, u.auditMetrics), "flakestream_audit_records_total")
	if !accounting.WaitFor(2*time.Minute, func() bool { return metric(get(t, u.auditMetrics), "flakestream_audit_records_total") > a1 }) || a1 <= 0 {
		t.Fatalf("flakestream_audit_records_total did not rise from %v on the audit's /metrics", a1)
	}

	code, err := b.stop(90 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := b.stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, b.stderr.String())
	}
	m := regexp.MustCompile(`in +(\d+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no count of orders in:\n%s", out)
	}
	// Every dead-letter class came by, the sixth with order 5,000: at
	// least that many went in, however fast the machine sent them.
	if in, _ := strconv.Atoi(m[1]); in < 5000 {
		t.Fatalf("%d orders in, want at least the 5,000 that bring every dead-letter class", in)
	}
	for _, want := range []string{
		"duplicates 0, lost 0: exactly once, every number unique",
		"anomalies: duplicate 0, renumbered 0, backwards 0, unknown_server 0, unknown_worker 0, future 0, lag 0, invalid 0",
		"audited exactly once into orders.numbered.audit",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("the summary lacks %q:\n%s", want, out)
		}
	}
	t.Logf("summary:\n%s", out)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Flags that only --serve reads are refused without it; --orders is
// refused with it.
func TestDemoServeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--rate", "10"}, "flakestream: --rate needs --serve\n"},
		{[]string{"demo", "--stop-after", "1s"}, "flakestream: --stop-after needs --serve\n"},
		{[]string{"demo", "--serve", "--orders", "10"}, "flakestream: --orders is for the one-shot demo; --serve runs until Ctrl-C (or --stop-after)\n"},
		{[]string{"demo", "--serve", "--rate", "0"}, "flakestream: --rate 0: want 1 to 100000 orders a second\n"},
		{[]string{"demo", "--serve", "--value-format", "avro"}, "flakestream: --serve: demo --serve streams JSON orders only; run demo without --serve for --value-format avro\n"},
	} {
		_, errOut, code := runApp(t, "", nil, c.args...)
		if code != 2 || errOut != c.want {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q", c.args, code, errOut, c.want)
		}
	}
}

// The live page of `demo --serve` in headless Chromium, with data: the
// audited count rising, both issuers' rates drawn, no anomaly. Its
// screenshot goes to $FLAKESTREAM_ARTIFACTS (if set) and, with
// -update-screenshot, to docs/demo-serve.png for docs/operations.md.
func TestDemoServeScreenshot(t *testing.T) {
	chrome := browsertest.Chromium(t)
	_, u := startServe(t, "--rate", "1000", "--partitions", "4")
	tab := browsertest.Start(t, chrome)
	eval, waitJS := tab.Eval, tab.WaitJS
	tab.Navigate(u.page)
	count := func() int {
		n, _ := strconv.Atoi(eval(`document.getElementById("audited").textContent.replace(/\D/g, "")`))
		return n
	}
	waitJS("records audited", `Number(document.getElementById("audited").textContent.replace(/\D/g, "")) > 0`)
	waitJS("both issuers' rates drawn", `document.querySelectorAll("#pairs tbody tr svg polyline").length >= 2`)
	waitJS("the latest records listed", `document.querySelectorAll("#records tbody tr").length >= 10`)
	first := count()
	// Twenty seconds of rates on the charts, for a picture worth looking
	// at.
	time.Sleep(20 * time.Second)
	waitJS("the count rising without a reload", fmt.Sprintf(`Number(document.getElementById("audited").textContent.replace(/\D/g, "")) > %d`, first))
	for _, k := range []string{"duplicate", "backwards", "unknown_server", "lag", "invalid"} {
		if got := eval(`document.getElementById("anom-` + k + `").textContent`); got != "0" {
			t.Fatalf("anomaly %s = %q on the live page, want 0", k, got)
		}
	}
	if s := eval(`document.getElementById("status").textContent`); !strings.HasPrefix(s, "live") {
		t.Fatalf("status %q, want live", s)
	}
	// The window, not the full page: the cards, the anomalies, the rates
	// and the newest records, as a user first sees them.
	png := tab.Screenshot(false)
	var paths []string
	if d := os.Getenv("FLAKESTREAM_ARTIFACTS"); d != "" {
		paths = append(paths, filepath.Join(d, "demo-serve.png"))
	}
	if *updateScreenshot {
		paths = append(paths, filepath.Join("..", "..", "docs", "demo-serve.png"))
	}
	if len(paths) == 0 {
		paths = append(paths, filepath.Join(t.TempDir(), "demo-serve.png"))
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	tab.NoJSErrors()
}
