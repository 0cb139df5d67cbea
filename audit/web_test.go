package audit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/test/browsertest"
	"github.com/flakestream/flakestream/test/pipetest"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// artifactDir is where screenshots go: FLAKESTREAM_ARTIFACTS if set, else
// the test's temporary directory.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("FLAKESTREAM_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// The page is served from the binary with a policy that forbids anything
// from elsewhere, and the summary it polls is JSON.
func TestAuditPageServes(t *testing.T) {
	a, err := New(eos.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"orders.numbered"}})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := pipeline.Serve(t.Context(), "127.0.0.1:0", prometheus.NewRegistry(), a.Ready, a.Handlers(), pipetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/": "<title>flakestream audit</title>", "/app.js": "api/summary",
		"/style.css": "--bg", "/api/summary": `"kinds":["duplicate","renumbered","backwards","unknown_server","unknown_worker","future","lag","invalid"]`} {
		res, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q", path, res.StatusCode, want)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	for _, f := range []string{"web/index.html", "web/app.js", "web/style.css"} {
		b, _ := web.ReadFile(f)
		if strings.Contains(string(b), "http://") && !strings.Contains(string(b), "http://www.w3.org/2000/svg") || strings.Contains(string(b), "https://") {
			t.Errorf("%s names another origin", f)
		}
	}
}

// The live page in headless Chromium: it renders the latest records and
// the anomaly counts, and updates without a reload when more records are
// audited. Screenshots of both states are saved as test artifacts.
func TestAuditLivePage(t *testing.T) {
	chrome := browsertest.Chromium(t)
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 2)
	audit := topic + ".audit"
	k.CreateTopic(t, audit, 2)
	reg := prometheus.NewRegistry()
	run := startAuditor(t, k.Addrs, setLoop(func(s *eos.Config) { s.Topics = []string{topic} }), Topic(audit), setLoop(func(s *eos.Config) { s.Group = topic + "-audit"; s.InstanceID = "page" }), AllowedServers(1), setLoop(func(s *eos.Config) { s.Registerer = reg }))
	addr, err := pipeline.Serve(t.Context(), "127.0.0.1:0", reg, run.a.Ready, run.a.Handlers(), pipetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}

	// 40 clean records, then one number again: a duplicate.
	recs := cleanStream(t, topic, 2, 40, time.Now().Add(-2*time.Second))
	recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{}`), Timestamp: time.Now(), Headers: recs[39].Headers})
	produceTo(t, k, recs...)
	waitAudited(t, 41, run)

	tab := browsertest.Start(t, chrome)
	tab.PollTimeout = 20 * time.Second
	eval, waitJS := tab.Eval, tab.WaitJS
	dir := artifactDir(t)
	shot := func(name string) {
		t.Helper()
		png := tab.Screenshot(true)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	text := func(id string) string {
		return eval(`document.getElementById(` + fmt.Sprintf("%q", id) + `).textContent`)
	}

	url := "http://" + addr.String() + "/"
	tab.Navigate(url)
	waitJS("41 records audited", `document.getElementById("audited").textContent === "41"`)
	waitJS("41 rows of latest records", `document.querySelectorAll("#records tbody tr").length === 41`)
	waitJS("one duplicate", `document.getElementById("anom-duplicate").textContent === "1"`)
	// Records and flags are counted apart, and the delay says what it is.
	if got := text("anomalies-total") + " | " + text("anomalies-sub"); got != "1 | 1 flag: duplicate 1" {
		t.Fatalf("records with anomalies card %q, want 1 record and 1 flag", got)
	}
	if got := text("lag-sub"); got != "the number's time minus the record's timestamp" && !strings.HasPrefix(got, "below 0: ") {
		t.Fatalf("numbering delay card says %q, not what it is", got)
	}
	if got := text("anom-backwards") + "/" + text("anom-invalid"); got != "0/0" {
		t.Fatalf("backwards/invalid counts %q, want 0/0", got)
	}
	flaggedRows := eval(`String(document.querySelectorAll("#flagged tbody tr").length)`)
	firstRow := eval(`document.querySelector("#records tbody tr").textContent`)
	eval(`window.__notReloaded = true; "marked"`) // a mark that a reload would wipe out
	if flaggedRows != "1" || !strings.Contains(firstRow, "duplicate") {
		t.Fatalf("%s rows of latest anomalies, newest record row %q: want 1 and the duplicate first", flaggedRows, firstRow)
	}
	shot("audit-page-1.png")

	// More records, one from a server that is not allowed: the page
	// updates in place.
	l := idgen.DefaultLayout()
	more := cleanStream(t, topic, 2, 30, time.Now().Add(-time.Second))
	foreign := mustCompose(t, l, time.Now(), 9, 3, 0)
	produceTo(t, k, more...)
	// Once those are audited, so that it is the newest record whatever
	// order a batch of two partitions comes in.
	waitAudited(t, 71, run)
	produceTo(t, k, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{}`), Timestamp: time.Now(),
		Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: fmt.Appendf(nil, "%d", foreign)}}})
	waitAudited(t, 72, run)
	waitJS("72 records audited", `document.getElementById("audited").textContent === "72"`)
	waitJS("one unknown server", `document.getElementById("anom-unknown_server").textContent === "1"`)
	waitJS("the latest 50 records", `document.querySelectorAll("#records tbody tr").length === 50`)
	waitJS("two rows of anomalies", `document.querySelectorAll("#flagged tbody tr").length === 2`)
	waitJS("the newest record first", `document.querySelector("#records tbody tr").textContent.includes("unknown_server")`)
	waitJS("rates drawn", `document.querySelectorAll("#pairs tbody tr svg polyline").length >= 2`)
	waitJS("no reload", `window.__notReloaded === true`)
	waitJS("nothing loaded from elsewhere", `performance.getEntriesByType("resource").every(e => e.name.startsWith(location.origin))`)
	if s := text("status"); !strings.HasPrefix(s, "live") {
		t.Fatalf("status %q, want live", s)
	}
	shot("audit-page-2.png")

	// An order numbered twice: its source again with another number. The
	// renumbered tile counts it, and its row names the first copy.
	src := kgo.RecordHeader{Key: codec.HeaderSource, Value: []byte("orders/0/77")}
	firstID, secondID := mustCompose(t, l, time.Now(), 1, 3, 4000), mustCompose(t, l, time.Now().Add(time.Millisecond), 1, 3, 4001)
	produceTo(t, k, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{}`), Timestamp: time.Now(),
		Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: fmt.Appendf(nil, "%d", firstID)}, src}})
	produceTo(t, k, &kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{}`), Timestamp: time.Now(),
		Headers: []kgo.RecordHeader{{Key: codec.HeaderNumber, Value: fmt.Appendf(nil, "%d", secondID)}, src}})
	waitAudited(t, 74, run)
	waitJS("one renumbered", `document.getElementById("anom-renumbered").textContent === "1"`)
	waitJS("the renumbered row names its first copy",
		fmt.Sprintf(`document.querySelector("#flagged tbody tr").textContent.includes("renumbered") && document.querySelector("#flagged tbody tr").textContent.includes("first %s/0/") && document.querySelector("#flagged tbody tr").textContent.includes("#%d")`, topic, firstID))
	shot("audit-page-3.png")
	tab.NoJSErrors()
}
