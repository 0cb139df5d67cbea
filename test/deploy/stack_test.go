// Package deploy_test proves what deploy/ ships: the Prometheus rules
// (promtool check and unit tests), the Grafana dashboard (every PromQL
// expression parses and names only metrics a running worker or auditor
// exports), the docker-compose wiring of both, and the alert that matters
// most, FlakestreamDuplicateNumber, on a real Prometheus and Alertmanager.
package deploy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMain runs the tests from deploy/, whose files they read by
// relative path (prometheus/, grafana/, ../docs/, ../docker-compose.yml).
func TestMain(m *testing.M) {
	if err := os.Chdir("../../deploy"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	harness.Main(m)
}

// stack is a worker and an auditor (`flakestream run` and `flakestream
// audit` as child processes) on a testenv Kafka and a real Redis, each
// serving /metrics on 127.0.0.1.
type stack struct {
	env               *harness.Env
	worker, auditor   *harness.Process
	workerAddr        string // host:port of the worker's /metrics
	auditorAddr       string
	auditTopic, group string
}

// startStack starts the stack and numbers a few hundred orders, some of
// them malformed (so that the dead-letter series exist), and waits until
// the auditor has read them.
func startStack(t *testing.T) *stack {
	t.Helper()
	k := testenv.Kafka(t)
	r := testenv.RedisServer(t)
	e := harness.NewEnv(t, k, r, 2)
	harness.Binary(t)
	s := &stack{env: e, auditTopic: e.Output + ".audit", group: e.Input + "-audit"}
	k.CreateTopic(t, s.auditTopic, 2)
	s.workerAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	s.auditorAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
	s.worker = e.StartWorker(t, "w1", "--http-addr", s.workerAddr, "--log-level", "info")
	s.auditor = harness.Start(t, "auditor", filepath.Join(e.LogDir(), "auditor.log"),
		"audit", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", e.Output,
		"--audit-topic", s.auditTopic, "--group", s.group, "--instance-id", "a1",
		"--allowed-servers", "1", "--allowed-workers", "1",
		"--txn-timeout", "5s", "--http-addr", s.auditorAddr, "--log-level", "info")
	const n = 400
	mix := orders.Mix{BadPerMille: 50}
	e.Produce(t, n, mix)
	good := 0.0
	for i := range n {
		if mix.KindOf(i) == orders.Clean {
			good++
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		a, err := scrape(s.auditorAddr)
		var w map[string]*metricFamily
		if err == nil {
			w, err = scrape(s.workerAddr)
		}
		// The malformed go to the dead-letter topic, not to the auditor.
		audited, wReady, aReady := sampleSum(a, "flakestream_audit_records_total"), sampleSum(w, "flakestream_ready"), sampleSum(a, "flakestream_ready")
		// The lag gauges are first set when the groups have committed
		// offsets, at the next refresh (every 10s).
		lagged := w["flakestream_consumer_lag"] != nil && a["flakestream_audit_consumer_lag"] != nil
		if err == nil && audited >= good && wReady == 1 && aReady == 1 && lagged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker and auditor did not number and audit %d orders and report their lag within 60s: %v audited, ready %v and %v, lag gauges %v (last scrape error: %v)",
				n, audited, wReady, aReady, lagged, err)
		}
		for _, p := range []*harness.Process{s.worker, s.auditor} {
			if p.Exited() {
				t.Fatalf("%s exited: %v\n%s", p.Name, p.Err, harness.Tail(p.Stderr.String(), 3000))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s
}

// exported returns the names of every metric the worker and the auditor
// export, as Prometheus stores them (a histogram as its _bucket, _sum and
// _count series).
func (s *stack) exported(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, target := range []struct{ who, addr string }{{"worker", s.workerAddr}, {"auditor", s.auditorAddr}} {
		fams, err := scrape(target.addr)
		if err != nil {
			t.Fatalf("scrape the %s: %v", target.who, err)
		}
		for name, f := range fams {
			series := []string{name}
			switch f.GetType().String() {
			case "HISTOGRAM":
				series = []string{name + "_bucket", name + "_sum", name + "_count"}
			case "SUMMARY":
				series = append(series, name+"_sum", name+"_count")
			}
			for _, n := range series {
				if names[n] == "" {
					names[n] = target.who
				} else if names[n] != target.who {
					names[n] += "+" + target.who
				}
			}
		}
	}
	return names
}

// scrape reads the metrics at addr (host:port) in the text format.
func scrape(addr string) (map[string]*metricFamily, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// sampleSum adds up the values of every sample of a counter or gauge.
func sampleSum(fams map[string]*metricFamily, name string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

type metricFamily = dto.MetricFamily
