package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/flakestream/flakestream/test/harness"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

const (
	rulesPath     = "prometheus/flakestream-rules.yml"
	dashboardPath = "grafana/flakestream.json"
	runbooksPath  = "../docs/runbooks.md"
	alertsPath    = "../docs/operations.md"
	runbookBase   = "https://github.com/flakestream/flakestream/blob/main/docs/runbooks.md#"
)

// prometheusMade are series Prometheus makes itself, not an exporter.
var prometheusMade = map[string]bool{"up": true}

// pending are metrics the rules alert on before the code that exports them
// has landed. A pending metric that a running process exports fails
// TestMetricNamesExported, so that it leaves this list as soon as it can.
var pending = map[string]string{}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", rulesPath)
	}
	return rules
}

// query is one PromQL expression and where it comes from.
type query struct{ where, expr string }

func ruleQueries(t *testing.T) []query {
	var qs []query
	for _, r := range loadRules(t) {
		qs = append(qs, query{rulesPath + ": " + r.Alert + r.Record, r.Expr})
	}
	return qs
}

// dashboardVars are the values the dashboard's variables take when the
// tests parse its expressions.
var dashboardVars = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m",
	"$__interval", "1m", "$per_ms", "4096", "${per_ms}", "4096")

type panel struct {
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var flat []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			flat = append(flat, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, flat
}

func dashboardQueries(t *testing.T) []query {
	_, panels := loadDashboard(t)
	var qs []query
	for _, p := range panels {
		for _, tg := range p.Targets {
			qs = append(qs, query{fmt.Sprintf("%s: panel %q target %s", dashboardPath, p.Title, tg.RefID), dashboardVars.Replace(tg.Expr)})
		}
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no queries", dashboardPath)
	}
	return qs
}

// metricNames parses expr and returns every metric name it selects. A
// selector without a plain metric name (a regex on __name__, say) is an
// error: the tests could not check what it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && (m.Type != labels.MatchEqual || (name != "" && m.Value != name)) {
				bad = fmt.Errorf("selector %s: name it plainly, so that the tests can check it", vs)
			}
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

// TestQueriesParse parses every PromQL expression of the rules and the
// dashboard with the Prometheus parser.
func TestQueriesParse(t *testing.T) {
	for _, q := range append(ruleQueries(t), dashboardQueries(t)...) {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: selects no metric", q.where)
		}
	}
}

// TestAlertsAreDocumented checks what every alert carries: a severity, a
// summary, a runbook link to its section of docs/runbooks.md (that
// section's GitHub anchor), and a row in the alert table of
// docs/operations.md.
func TestAlertsAreDocumented(t *testing.T) {
	runbooks, err := os.ReadFile(runbooksPath)
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#+ +(.+)$`).FindAllStringSubmatch(string(runbooks), -1) {
		anchors[githubAnchor(h[1])] = true
	}
	alerts := 0
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts++
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary", r.Alert)
		}
		want := runbookBase + "runbook-" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook"]; got != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, got, want)
		}
		if !anchors["runbook-"+strings.ToLower(r.Alert)] {
			t.Errorf("%s: %s has no heading \"Runbook: %s\"", r.Alert, runbooksPath, r.Alert)
		}
		if !strings.Contains(string(table), "[`"+r.Alert+"`](runbooks.md#runbook-"+strings.ToLower(r.Alert)+")") {
			t.Errorf("%s: not in the alert table of %s, linked to its runbook", r.Alert, alertsPath)
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts")
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// spaces to dashes, punctuation other than - and _ dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDashboardPanels checks that the dashboard has the panels that
// docs/operations.md promises, and that every panel reads the data source
// variable (so that it works with any Prometheus data source).
func TestDashboardPanels(t *testing.T) {
	d, panels := loadDashboard(t)
	if d.UID != "flakestream" || d.Title == "" {
		t.Errorf("uid %q title %q: want uid flakestream and a title", d.UID, d.Title)
	}
	titles := map[string]bool{}
	for _, p := range panels {
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		for _, raw := range append([]json.RawMessage{p.Datasource}, func() (ds []json.RawMessage) {
			for _, tg := range p.Targets {
				ds = append(ds, tg.Datasource)
			}
			return ds
		}()...) {
			if !strings.Contains(string(raw), `"${datasource}"`) {
				t.Errorf("panel %q: data source %s, want uid ${datasource}", p.Title, raw)
			}
		}
	}
	for _, want := range []string{"Numbers per second by server and worker", "Anomalies by kind", "Numbering delay",
		"Consumer lag", "Transactions committed and aborted", "Dead letters by class", "Sequencer latency",
		"Capacity used per (server, worker)", "Readiness"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["per_ms"] == "" {
		t.Errorf("variables %v: want datasource (a data source) and per_ms", vars)
	}
}

// TestMetricNamesExported starts a worker and an auditor, lists what they
// export (go test -v), and checks that every metric the rules and the dashboard name is one they export (or one
// Prometheus makes, or one the rules record): a renamed metric fails here,
// not on a dashboard nobody looks at until the night it matters.
func TestMetricNamesExported(t *testing.T) {
	s := startStack(t)
	exported := s.exported(t)
	for _, n := range harness.SortedKeys(exported) { // with -v: what they export
		t.Logf("exported: %-55s by the %s", n, exported[n])
	}
	for _, want := range []string{"flakestream_ready", "flakestream_consumer_lag", "flakestream_audit_consumer_lag"} {
		if exported[want] == "" {
			t.Errorf("%s is not exported", want)
		}
	}
	recorded := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Record != "" {
			recorded[r.Record] = true
		}
	}
	for name, why := range pending {
		if exported[name] != "" {
			t.Errorf("%s (%s) is exported now: remove it from pending", name, why)
		}
	}
	for _, set := range []struct {
		name    string
		queries []query
	}{{"rules", ruleQueries(t)}, {"dashboard", dashboardQueries(t)}} {
		t.Run(set.name, func(t *testing.T) {
			checked := 0
			for _, q := range set.queries {
				names, err := metricNames(q.expr)
				if err != nil {
					t.Errorf("%s: %v", q.where, err)
					continue
				}
				for _, n := range names {
					switch {
					case exported[n] != "", prometheusMade[n], recorded[n] && set.name == "rules":
						checked++
					case pending[n] != "":
						t.Logf("%s: %s is pending (%s)", q.where, n, pending[n])
					default:
						t.Errorf("%s: no running worker or auditor exports %s", q.where, n)
					}
				}
			}
			if checked == 0 {
				t.Error("checked no metric name")
			}
		})
	}
}
