package deploy_test

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeService is the part of a docker-compose.yml service this test
// reads.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]any    `yaml:"depends_on"`
}

func readYAML(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// TestComposeMonitoring checks, without a Docker engine, how
// docker-compose.yml wires Prometheus and Grafana: every bind mount's source
// exists, ports are on 127.0.0.1, Prometheus reads the rules from the file
// this repository tests and scrapes the worker and audit services on their
// ports, Grafana's data source is that Prometheus, and its dashboard
// provider reads the directory the dashboard is mounted into.
// (`promtool check config` of the Prometheus configuration is in
// TestPromtool.)
func TestComposeMonitoring(t *testing.T) {
	var cf struct {
		Services map[string]composeService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	readYAML(t, "../docker-compose.yml", &cf)
	prom, ok := cf.Services["prometheus"]
	if !ok {
		t.Fatal("docker-compose.yml has no prometheus service")
	}
	graf, ok := cf.Services["grafana"]
	if !ok {
		t.Fatal("docker-compose.yml has no grafana service")
	}

	// mounts maps each service's container paths to host paths (relative
	// to deploy/, where the test runs) for bind mounts.
	mounts := map[string]map[string]string{}
	for name, s := range cf.Services {
		mounts[name] = map[string]string{}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %s beyond 127.0.0.1", name, p)
			}
		}
		for dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			}
		}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("service %s: volume %q: want source:target", name, v)
				continue
			}
			src, dst := parts[0], parts[1]
			if !strings.HasPrefix(src, ".") {
				if _, ok := cf.Volumes[src]; !ok {
					t.Errorf("service %s: named volume %s is not declared", name, src)
				}
				continue
			}
			host := filepath.Join("..", src)
			if _, err := os.Stat(host); err != nil {
				t.Errorf("service %s: bind mount source %s: %v", name, src, err)
			}
			mounts[name][dst] = host
		}
	}
	for _, want := range []string{"127.0.0.1:9090:9090"} {
		if !slices.Contains(prom.Ports, want) {
			t.Errorf("prometheus ports %v: want %s", prom.Ports, want)
		}
	}
	if !slices.Contains(graf.Ports, "127.0.0.1:3000:3000") {
		t.Errorf("grafana ports %v: want 127.0.0.1:3000:3000", graf.Ports)
	}

	// Prometheus: its configuration and rules are the files tested here.
	cfgPath := "/etc/prometheus/prometheus.yml"
	for _, a := range prom.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgPath = v
		}
	}
	hostCfg := hostPath(t, mounts["prometheus"], cfgPath)
	if hostCfg != filepath.Join("prometheus", "prometheus.yml") {
		t.Fatalf("prometheus reads %s, which is %s here; want deploy/prometheus/prometheus.yml", cfgPath, hostCfg)
	}
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, hostCfg, &pc)
	rulesFound := false
	for _, rf := range pc.RuleFiles {
		if !path.IsAbs(rf) {
			rf = path.Join(path.Dir(cfgPath), rf)
		}
		if hostPath(t, mounts["prometheus"], rf) == rulesPath {
			rulesFound = true
		}
	}
	if !rulesFound {
		t.Errorf("prometheus rule_files %v: none is %s", pc.RuleFiles, rulesPath)
	}
	targets := map[string]string{}
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[sc.JobName] = tg
			}
		}
	}
	// The job names are the ones FlakestreamNotReady matches; the targets
	// are the services' --http-addr ports.
	for job, svc := range map[string]string{"flakestream-worker": "worker", "flakestream-audit": "audit"} {
		s, ok := cf.Services[svc]
		if !ok {
			t.Errorf("no %s service", svc)
			continue
		}
		port := strings.TrimPrefix(s.Environment["FLAKESTREAM_HTTP_ADDR"], ":")
		if want := svc + ":" + port; port == "" || targets[job] != want {
			t.Errorf("prometheus job %s scrapes %q, want %q (FLAKESTREAM_HTTP_ADDR of %s)", job, targets[job], want, svc)
		}
	}

	// Grafana: the data source is the compose Prometheus, and the dashboard
	// provider reads where flakestream.json is mounted.
	prov := hostPath(t, mounts["grafana"], "/etc/grafana/provisioning")
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yml"), &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("grafana data sources %+v: want one default prometheus at http://prometheus:9090", ds)
	}
	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "flakestream.yml"), &dp)
	if dp.APIVersion != 1 || len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("grafana dashboard providers %+v: want one file provider", dp)
	}
	dash := path.Join(dp.Providers[0].Options.Path, "flakestream.json")
	if got := hostPath(t, mounts["grafana"], dash); got != dashboardPath {
		t.Errorf("grafana loads %s, which is %s here; want %s", dash, got, dashboardPath)
	}
	if home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != dash {
		t.Errorf("grafana home dashboard %q, want %q", home, dash)
	}
}

// hostPath maps a container path to the host path under the longest bind
// mount that holds it, relative to deploy/ ("" if none does).
func hostPath(t *testing.T, mounts map[string]string, p string) string {
	t.Helper()
	best := ""
	for dst := range mounts {
		if (p == dst || strings.HasPrefix(p, dst+"/")) && len(dst) > len(best) {
			best = dst
		}
	}
	if best == "" {
		t.Errorf("%s is on no bind mount", p)
		return ""
	}
	abs, err := filepath.Abs(filepath.Join(mounts[best], strings.TrimPrefix(p, best)))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
