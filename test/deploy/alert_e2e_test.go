package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// fireWithin is how soon after a duplicate FlakestreamDuplicateNumber
	// must be firing on Prometheus.
	fireWithin = 30 * time.Second
	// silentFor is how long, with no duplicate, it must stay silent: 15
	// evaluations at the test's 1s interval, after the counter has been
	// scraped (so that the silence is not that of a missing series).
	silentFor = 15 * time.Second
	dupAlert  = "FlakestreamDuplicateNumber"
	// renumAlert fires once an order is seen with a second number.
	renumAlert = "FlakestreamOrderRenumbered"
)

// TestDuplicateAlertOnPrometheus runs Debian's prometheus with the rules
// file, a 1s scrape and evaluation interval, scraping a worker and an
// auditor, and Debian's prometheus-alertmanager routing to a webhook in the
// test. With no duplicate, FlakestreamDuplicateNumber stays silent; one
// duplicate number written to the numbered topic makes it fire within 30s
// and reach the webhook with its severity and runbook. On the way, every
// query of the dashboard must return data from the worker and the auditor.
// Then a numbered record written again with another number (its source
// the same) makes FlakestreamOrderRenumbered fire and reach the webhook
// the same way, while the plain copy before it did not.
func TestDuplicateAlertOnPrometheus(t *testing.T) {
	promBin := lookBinary(t, "prometheus", "prometheus")
	amBin := lookBinary(t, "prometheus-alertmanager", "prometheus-alertmanager")
	s := startStack(t)

	hook := newWebhook(t)
	amAddr := freeAddr(t)
	amDir := t.TempDir()
	writeFile(t, filepath.Join(amDir, "alertmanager.yml"), fmt.Sprintf(`route:
  receiver: test
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: test
    webhook_configs:
      - url: %s/alerts
        send_resolved: false
`, hook.URL))
	startService(t, "alertmanager", amBin, "--config.file="+filepath.Join(amDir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(amDir, "data"), "--web.listen-address="+amAddr,
		"--cluster.listen-address=") // no cluster: nothing listens beyond 127.0.0.1

	rules, err := filepath.Abs(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	promDir := t.TempDir()
	writeFile(t, filepath.Join(promDir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: flakestream-worker
    static_configs:
      - targets: [%q]
  - job_name: flakestream-audit
    static_configs:
      - targets: [%q]
`, rules, amAddr, s.workerAddr, s.auditorAddr))
	startService(t, "prometheus", promBin, "--config.file="+filepath.Join(promDir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(promDir, "data"), "--web.listen-address="+promAddr)
	prom := "http://" + promAddr

	// Wait until Prometheus has scraped the auditor's duplicate counter
	// (pre-set to 0) a few times and evaluated the rules on it.
	waitFor(t, 60*time.Second, "Prometheus scraping the worker and auditor and evaluating the rules", func() (bool, string) {
		v, err := promQuery(prom, `count_over_time(flakestream_audit_anomalies_total{kind="duplicate",job="flakestream-audit"}[1m])`)
		if err != nil {
			return false, err.Error()
		}
		up, err := promQuery(prom, `sum(up{job=~"flakestream-.*"})`)
		if err != nil {
			return false, err.Error()
		}
		return len(v) == 1 && v[0] >= 3 && len(up) == 1 && up[0] == 2, fmt.Sprintf("samples %v, targets up %v", v, up)
	})

	// No duplicate: silent, on Prometheus and at the webhook.
	end := time.Now().Add(silentFor)
	for time.Now().Before(end) {
		if a, err := promAlerts(prom); err != nil {
			t.Fatal(err)
		} else if st, ok := a[dupAlert]; ok {
			t.Fatalf("%s is %s with no duplicate number", dupAlert, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if v, err := promQuery(prom, `flakestream_audit_anomalies_total{kind="duplicate"}`); err != nil || len(v) != 1 || v[0] != 0 {
		t.Fatalf("duplicate counter after the silent window: %v, %v; want one series at 0", v, err)
	}
	if hook.received(dupAlert) {
		t.Fatalf("the webhook got %s with no duplicate number", dupAlert)
	}
	t.Logf("%s silent for %v (%d evaluations) with no duplicate", dupAlert, silentFor, int(silentFor/time.Second))

	// Every dashboard query returns data from the real worker and auditor:
	// not only does it parse, it selects what they export.
	for _, q := range dashboardQueries(t) {
		if v, err := promQuery(prom, q.expr); err != nil {
			t.Errorf("%s: %v", q.where, err)
		} else if len(v) == 0 {
			t.Errorf("%s: no data on Prometheus\n%s", q.where, q.expr)
		}
	}

	// One duplicate number.
	injected := time.Now()
	s.injectDuplicate(t)
	var firedAfter time.Duration
	waitFor(t, fireWithin, dupAlert+" firing on Prometheus", func() (bool, string) {
		a, err := promAlerts(prom)
		if err != nil {
			return false, err.Error()
		}
		firedAfter = time.Since(injected)
		return a[dupAlert] == "firing", fmt.Sprintf("alerts %v", a)
	})
	t.Logf("%s firing %.1fs after the duplicate was written", dupAlert, firedAfter.Seconds())
	waitFor(t, 30*time.Second, dupAlert+" at the webhook through Alertmanager", func() (bool, string) {
		return hook.received(dupAlert), "nothing yet"
	})
	got, _ := hook.alert(dupAlert)
	if got.Labels["severity"] != "critical" || got.Labels["job"] != "flakestream-audit" ||
		got.Annotations["runbook"] != runbookBase+"runbook-flakestreamduplicatenumber" || got.Annotations["summary"] == "" {
		t.Errorf("the webhook got %+v: want severity critical, job flakestream-audit, a summary and the runbook link", got)
	}
	t.Logf("%s at the webhook %.1fs after the duplicate was written", dupAlert, time.Since(injected).Seconds())

	// So far, with a copy (same source, same number), no order was
	// renumbered. Now one is: the same source with another number.
	if a, err := promAlerts(prom); err != nil {
		t.Fatal(err)
	} else if st, ok := a[renumAlert]; ok {
		t.Fatalf("%s is %s after a copied record (a duplicate, not a renumbering)", renumAlert, st)
	}
	injected = time.Now()
	s.injectRenumbered(t)
	waitFor(t, fireWithin, renumAlert+" firing on Prometheus", func() (bool, string) {
		a, err := promAlerts(prom)
		if err != nil {
			return false, err.Error()
		}
		firedAfter = time.Since(injected)
		return a[renumAlert] == "firing", fmt.Sprintf("alerts %v", a)
	})
	t.Logf("%s firing %.1fs after the renumbered copy was written", renumAlert, firedAfter.Seconds())
	waitFor(t, 30*time.Second, renumAlert+" at the webhook through Alertmanager", func() (bool, string) {
		return hook.received(renumAlert), "nothing yet"
	})
	got, _ = hook.alert(renumAlert)
	if got.Labels["severity"] != "critical" || got.Labels["job"] != "flakestream-audit" ||
		got.Annotations["runbook"] != runbookBase+"runbook-flakestreamorderrenumbered" || got.Annotations["summary"] == "" {
		t.Errorf("the webhook got %+v: want severity critical, job flakestream-audit, a summary and the runbook link", got)
	}
	t.Logf("%s at the webhook %.1fs after the renumbered copy was written", renumAlert, time.Since(injected).Seconds())
}

// injectRenumbered reads one numbered record from the output topic and
// writes it there again with another number (a fresh one of server 1,
// worker 1, as the auditor allows): one order with two numbers, the
// incident FlakestreamOrderRenumbered is for.
func (s *stack) injectRenumbered(t *testing.T) {
	t.Helper()
	cl := s.env.Kafka.Client(t, kgo.ConsumeTopics(s.env.Output), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read a numbered record to renumber: %v", err)
		}
		var rec *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if rec == nil {
				rec = r
			}
		})
		if rec == nil {
			continue
		}
		id, err := idgen.DefaultLayout().Compose(time.Now().UnixMilli(), 1, 1, 4095)
		if err != nil {
			t.Fatal(err)
		}
		again := &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value}
		for _, h := range rec.Headers {
			if h.Key == codec.HeaderNumber {
				h.Value = strconv.AppendInt(nil, id, 10)
			}
			again.Headers = append(again.Headers, h)
		}
		if err := cl.ProduceSync(ctx, again).FirstErr(); err != nil {
			t.Fatalf("write the renumbered copy: %v", err)
		}
		t.Logf("wrote the record at %s/%d@%d again, numbered %d", rec.Topic, rec.Partition, rec.Offset, id)
		return
	}
}

// injectDuplicate reads one numbered record from the output topic and
// writes it there again: the same number twice, the incident
// FlakestreamDuplicateNumber is for.
func (s *stack) injectDuplicate(t *testing.T) {
	t.Helper()
	cl := s.env.Kafka.Client(t, kgo.ConsumeTopics(s.env.Output), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read a numbered record to duplicate: %v", err)
		}
		var rec *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if rec == nil {
				rec = r
			}
		})
		if rec == nil {
			continue
		}
		dup := &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
		if err := cl.ProduceSync(ctx, dup).FirstErr(); err != nil {
			t.Fatalf("write the duplicate: %v", err)
		}
		t.Logf("wrote the record at %s/%d@%d again", rec.Topic, rec.Partition, rec.Offset)
		return
	}
}

// lookBinary returns the path of a Debian package's binary, or skips (fails
// under CI=true).
func lookBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("no %s on PATH (apt-get install %s)", name, pkg))
	}
	return p
}

func freeAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startService runs a service binary for the rest of the test, bounded by
// 5 minutes and killed with the test binary; its output is shown if the
// test fails.
func startService(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, bin, args...)
	out := &harness.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", name, harness.Tail(out.String(), 3000))
		}
	})
}

// waitFor polls cond every 250ms until it holds, or fails the test after
// timeout with cond's last word.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v: %s", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func getJSON(url string, v any) error {
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// promQuery runs an instant query and returns the values of its vector.
func promQuery(prom, q string) ([]float64, error) {
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(prom+"/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return nil, err
	}
	var out []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", q, s.Value[1])
		}
		out = append(out, v)
	}
	return out, nil
}

// promAlerts returns the state (pending, firing) of every active alert by
// name.
func promAlerts(prom string) (map[string]string, error) {
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(prom+"/api/v1/alerts", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range r.Data.Alerts {
		if out[a.Labels["alertname"]] != "firing" {
			out[a.Labels["alertname"]] = a.State
		}
	}
	return out, nil
}

// webhookAlert is one alert of Alertmanager's webhook message.
type webhookAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// webhook is Alertmanager's receiver: it keeps the last firing alert it
// was sent of each name.
type webhook struct {
	*httptest.Server
	mu     sync.Mutex
	alerts map[string]webhookAlert
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{alerts: map[string]webhookAlert{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Alerts []webhookAlert `json:"alerts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		for _, a := range msg.Alerts {
			if a.Status == "firing" {
				h.alerts[a.Labels["alertname"]] = a
			}
		}
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *webhook) received(name string) bool {
	_, ok := h.alert(name)
	return ok
}

func (h *webhook) alert(name string) (webhookAlert, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.alerts[name]
	return a, ok
}
