package helm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// TestLint is `helm lint` with the default values and with every optional
// part on: any warning or error fails.
func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			for _, m := range Lint(chartDir, vs.values(), namespace) {
				t.Errorf("lint: %s", m)
			}
		})
	}
}

// TestRender renders each value set (every document decoded strictly,
// see render) and checks that what each one turns on is there.
func TestRender(t *testing.T) {
	want := map[string][]string{
		"defaults": {"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount", "StatefulSet"},
		"all-on": {"ConfigMap", "Deployment", "Job", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "ScaledObject", "Service",
			"ServiceAccount", "ServiceMonitor", "StatefulSet"},
		"all-on-alt": {"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Job", "NetworkPolicy", "PodDisruptionBudget", "PodMonitor",
			"PrometheusRule", "Service", "ServiceAccount", "StatefulSet"},
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			kinds := map[string]bool{}
			for _, o := range r {
				kinds[o.kind] = true
			}
			var got []string
			for k := range kinds {
				got = append(got, k)
			}
			if !sameSet(got, want[vs.name]) {
				t.Errorf("kinds %v, want %v", sorted(got), want[vs.name])
			}
			t.Logf("%d objects", len(r))
		})
	}
}

// TestInstanceIDFromPodName: each worker's --instance-id is its pod's
// name (downward API), and nothing overrides it: not an argument, not the
// config file, not --transactional-id.
func TestInstanceIDFromPodName(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			sts := one[*appsv1.StatefulSet](t, r)
			pod := sts.Spec.Template.Spec
			c := container(t, pod, "worker")
			var found bool
			for _, e := range c.Env {
				if e.Name != "FLAKESTREAM_INSTANCE_ID" {
					continue
				}
				found = true
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
					t.Errorf("FLAKESTREAM_INSTANCE_ID = %+v, want valueFrom.fieldRef.fieldPath metadata.name", e)
				}
			}
			if !found {
				t.Error("no FLAKESTREAM_INSTANCE_ID in the worker's env")
			}
			for _, a := range c.Args {
				for _, f := range []string{"--instance-id", "--transactional-id"} {
					if a == f || strings.HasPrefix(a, f+"=") {
						t.Errorf("worker argument %s overrides the pod name", a)
					}
				}
			}
			file, cfg := configFile(t, r, pod, c)
			for _, k := range []string{"instance-id", "transactional-id"} {
				if _, ok := cfg[k]; ok {
					t.Errorf("%s sets %s", file, k)
				}
			}
			if vs.name == "defaults" && cfg["static-membership"] != true {
				t.Errorf("%s: static-membership %v, want true by default", file, cfg["static-membership"])
			}
		})
	}
}

// TestGracePeriodAboveShutdownTimeout: Kubernetes waits longer than the
// process's own --shutdown-timeout (the file's, else the flag's default)
// before it SIGKILLs a worker or an audit pod.
func TestGracePeriodAboveShutdownTimeout(t *testing.T) {
	golden := readGolden(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			checked := 0
			for name, pod := range workloadPods(r) {
				for _, c := range pod.Containers {
					cmd := c.Args[0]
					def, ok := golden[cmd]["shutdown-timeout"]
					if !ok {
						continue // replay: no --shutdown-timeout
					}
					file, cfg := configFile(t, r, pod, c)
					raw := strings.Trim(def.def, `"`)
					if v, ok := cfg["shutdown-timeout"]; ok {
						raw, _ = v.(string)
					}
					d, err := time.ParseDuration(raw)
					if err != nil {
						t.Fatalf("%s: shutdown-timeout %q: %v", file, raw, err)
					}
					if pod.TerminationGracePeriodSeconds == nil {
						t.Errorf("%s: no terminationGracePeriodSeconds (Kubernetes' default is 30 s)", name)
						continue
					}
					grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
					if grace <= d {
						t.Errorf("%s: terminationGracePeriodSeconds %v is not above --shutdown-timeout %v", name, grace, d)
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("no container with a shutdown timeout")
			}
		})
	}
}

// refusal is a set of values the chart refuses, and what the message names.
type refusal struct {
	name   string
	values map[string]any
	want   string
}

// renderRefusals are values that cannot work.
var renderRefusals = []refusal{
	{"grace not above timeout", map[string]any{"worker": map[string]any{"shutdownTimeoutSeconds": 30, "terminationGracePeriodSeconds": 30}},
		"worker.terminationGracePeriodSeconds"},
	{"KEDA max above partitions", map[string]any{"autoscaling": map[string]any{"inputPartitions": 4, "maxReplicas": 5, "keda": map[string]any{"enabled": true}}},
		"autoscaling.maxReplicas 5 is larger than autoscaling.inputPartitions 4"},
	{"HPA max above partitions", map[string]any{"autoscaling": map[string]any{"inputPartitions": 4, "maxReplicas": 5, "hpa": map[string]any{"enabled": true}}},
		"autoscaling.maxReplicas 5 is larger than autoscaling.inputPartitions 4"},
	{"KEDA max times lanes above partitions", map[string]any{"worker": map[string]any{"config": map[string]any{"lanes": 2}},
		"autoscaling": map[string]any{"inputPartitions": 8, "maxReplicas": 5, "keda": map[string]any{"enabled": true}}},
		"autoscaling.maxReplicas 5 × worker.config.lanes 2 is larger than autoscaling.inputPartitions 8"},
	{"lanes not a number", map[string]any{"worker": map[string]any{"config": map[string]any{"lanes": "two"}}},
		`worker.config.lanes "two": want auto or a number of at least 1`},
	{"no lanes", map[string]any{"worker": map[string]any{"config": map[string]any{"lanes": 0}}},
		`worker.config.lanes "0"`},
	{"KEDA without partitions", map[string]any{"autoscaling": map[string]any{"keda": map[string]any{"enabled": true}}},
		"autoscaling.inputPartitions"},
	{"both autoscalers", map[string]any{"autoscaling": map[string]any{"inputPartitions": 4, "keda": map[string]any{"enabled": true}, "hpa": map[string]any{"enabled": true}}},
		"choose one"},
	{"instance-id in the config", map[string]any{"worker": map[string]any{"config": map[string]any{"instance-id": "w"}}},
		"worker.config.instance-id"},
	{"shutdown-timeout in the config", map[string]any{"worker": map[string]any{"config": map[string]any{"shutdown-timeout": "40s"}}},
		"worker.config.shutdown-timeout"},
	{"both monitors", map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true}}},
		"choose one"},
	{"secret key without a secret", map[string]any{"secret": map[string]any{"saslPasswordKey": "p"}},
		"secret.name"},
}

// secretRefusals are the secretLeaks as refusals.
func secretRefusals() []refusal {
	var out []refusal
	for _, sc := range secretLeaks {
		out = append(out, refusal{sc.name, sc.values(), sc.want})
	}
	return out
}

// TestRenderRefuses: values that cannot work fail the render with a
// message that names the value.
func TestRenderRefuses(t *testing.T) {
	c := loadChart(t)
	cases := append(slices.Clone(renderRefusals), secretRefusals()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderChart(c, tc.values)
			if err == nil {
				t.Fatalf("rendered; want an error naming %q\n%s", tc.want, out["flakestream/templates/configmap.yaml"])
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// secretSentinel is a password the tests hand the chart in the places a
// user might write one; it must never reach a ConfigMap.
const secretSentinel = "s3cret-sentinel-7f2c"

// secretLeaks are values that would put a password into the ConfigMap;
// the chart must refuse each.
var secretLeaks = []struct {
	name   string
	values func() map[string]any
	want   string
}{
	{"SASL password in the common config", func() map[string]any {
		return map[string]any{"common": map[string]any{"config": map[string]any{"sasl-password": secretSentinel}}}
	}, "common.config.sasl-password"},
	{"registry password in the audit config", func() map[string]any {
		return map[string]any{"audit": map[string]any{"config": map[string]any{"schema-registry-password": secretSentinel}}}
	}, "audit.config.schema-registry-password"},
	{"Redis URL with a password", func() map[string]any {
		return map[string]any{"worker": map[string]any{"config": map[string]any{"redis": "redis://default:" + secretSentinel + "@redis:6379/0"}}}
	}, "worker.config.redis"},
	{"Sentinel URL with sentinel_password", func() map[string]any {
		return map[string]any{"worker": map[string]any{"config": map[string]any{"redis": "redis+sentinel://s1:26379,s2:26379/mymaster?db=0&sentinel_password=" + secretSentinel}}}
	}, "worker.config.redis"},
	{"cluster URL with a password and no user", func() map[string]any {
		return map[string]any{"common": map[string]any{"config": map[string]any{"redis": "rediss+cluster://:" + secretSentinel + "@n1:6379,n2:6379"}}}
	}, "common.config.redis"},
	{"OAuth client secret in the common config", func() map[string]any {
		return map[string]any{"common": map[string]any{"config": map[string]any{"sasl-oauth-client-secret": secretSentinel}}}
	}, "common.config.sasl-oauth-client-secret"},
	{"second registry URL with a password", func() map[string]any {
		return map[string]any{"audit": map[string]any{"config": map[string]any{"schema-registry": "https://r1:8081,https://u:" + secretSentinel + "@r2:8081"}}}
	}, "audit.config.schema-registry"},
	{"registry URL with a password", func() map[string]any {
		return map[string]any{"replay": map[string]any{"enabled": true, "config": map[string]any{
			"input-topic": "a", "output-topic": "b", "schema-registry": "https://u:" + secretSentinel + "@registry:8081"}}}
	}, "replay.config.schema-registry"},
}

// TestNoSecretInConfigMaps: no ConfigMap of any render holds a password
// or the test's sentinel (the leaks above must not render at all), and
// every password variable of every container comes from the Secret.
func TestNoSecretInConfigMaps(t *testing.T) {
	c := loadChart(t)
	for _, sc := range secretLeaks {
		if out, err := renderChart(c, sc.values()); err == nil {
			for name, m := range out {
				if strings.Contains(m, secretSentinel) {
					t.Errorf("%s: the password is rendered into %s", sc.name, name)
				}
			}
		}
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			for _, cm := range all[*corev1.ConfigMap](r) {
				for key, data := range cm.Data {
					if strings.Contains(data, secretSentinel) {
						t.Errorf("ConfigMap %s key %s holds the sentinel password", cm.Name, key)
					}
					if !strings.HasSuffix(key, ".yaml") {
						continue
					}
					var cfg map[string]any
					if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
						t.Fatal(err)
					}
					for k, v := range cfg {
						if strings.Contains(k, "password") {
							t.Errorf("ConfigMap %s key %s sets %s", cm.Name, key, k)
						}
						if s, ok := v.(string); ok && urlWithPassword(s) {
							t.Errorf("ConfigMap %s key %s: %s is a URL with a password", cm.Name, key, k)
						}
					}
				}
			}
			withSecret := vs.name != "defaults"
			for name, pod := range workloadPods(r) {
				for _, ctr := range pod.Containers {
					got := map[string]bool{}
					for _, e := range ctr.Env {
						if !strings.Contains(e.Name, "PASSWORD") && e.Name != "FLAKESTREAM_REDIS" {
							continue
						}
						got[e.Name] = true
						if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "flakestream-secrets" {
							t.Errorf("%s %s: %s does not come from the Secret: %+v", name, ctr.Name, e.Name, e)
						}
					}
					if withSecret && !got["FLAKESTREAM_SASL_PASSWORD"] {
						t.Errorf("%s %s: secret.saslPasswordKey is set but FLAKESTREAM_SASL_PASSWORD is not in the env", name, ctr.Name)
					}
				}
			}
		})
	}
}

// urlWithPassword reports whether s is a URL with user:password@ in it.
func urlWithPassword(s string) bool {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	userinfo, _, ok := strings.Cut(host, "@")
	return ok && strings.Contains(userinfo, ":")
}

// rulesFile is the repository's Prometheus rule file, the one source of
// the PrometheusRule.
type rulesFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

func readRules(t *testing.T) rulesFile {
	t.Helper()
	var rf rulesFile
	if err := yaml.UnmarshalStrict(readRepoFile(t, "deploy/prometheus/flakestream-rules.yml"), &rf); err != nil {
		t.Fatalf("deploy/prometheus/flakestream-rules.yml: %v", err)
	}
	if len(rf.Groups) == 0 || len(rf.Groups[0].Rules) == 0 {
		t.Fatal("deploy/prometheus/flakestream-rules.yml: no rules")
	}
	return rf
}

// TestPrometheusRuleIsTheRulesFile: the PrometheusRule's groups equal
// deploy/prometheus/flakestream-rules.yml's, rendered from the chart
// directory and from the chart as `helm package` stores it (which must
// hold the file's content, not a dangling link).
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	want := readRules(t)
	c := loadChart(t)
	packaged, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := loader.Load(packaged)
	if err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]*chart.Chart{"directory": c, "package": pc} {
		t.Run(name, func(t *testing.T) {
			r := renderOf(t, ch, allOn())
			pr := one[*monitoringv1.PrometheusRule](t, r)
			if !reflect.DeepEqual(pr.Spec.Groups, want.Groups) {
				_, g, w := jsonEqual(pr.Spec.Groups, want.Groups)
				t.Errorf("PrometheusRule groups differ from the rules file's:\n got %.2000s\nwant %.2000s", g, w)
			}
			dash := readRepoFile(t, "deploy/grafana/flakestream.json")
			var found bool
			for _, cm := range all[*corev1.ConfigMap](r) {
				data, ok := cm.Data["flakestream.json"]
				if !ok {
					continue
				}
				found = true
				if data != strings.TrimRight(string(dash), "\n") {
					t.Errorf("ConfigMap %s: flakestream.json differs from deploy/grafana/flakestream.json", cm.Name)
				}
				if cm.Labels["grafana_dashboard"] != "1" {
					t.Errorf("ConfigMap %s: labels %v, want grafana_dashboard: \"1\" for the sidecar", cm.Name, cm.Labels)
				}
			}
			if !found {
				t.Error("no dashboard ConfigMap")
			}
		})
	}
}

// TestScaledObject: KEDA scales the worker's StatefulSet on its group's
// lag, at most to the input's partitions.
func TestScaledObject(t *testing.T) {
	r := render(t, allOn())
	so := one[*scaledObject](t, r)
	sts := one[*appsv1.StatefulSet](t, r)
	ref := so.Spec.ScaleTargetRef
	if ref.Kind != "StatefulSet" || ref.Name != sts.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("scaleTargetRef %+v, want the worker's StatefulSet %s", ref, sts.Name)
	}
	partitions := allOn()["autoscaling"].(map[string]any)["inputPartitions"].(int)
	if so.Spec.MaxReplicaCount == nil {
		t.Error("no maxReplicaCount (KEDA's default is 100)")
	} else if int(*so.Spec.MaxReplicaCount) > partitions {
		t.Errorf("maxReplicaCount %d, want at most the %d input partitions", *so.Spec.MaxReplicaCount, partitions)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
		t.Fatalf("triggers %+v, want one kafka trigger", so.Spec.Triggers)
	}
	md := so.Spec.Triggers[0].Metadata
	if md["consumerGroup"] != "flakestream" || md["topic"] != "orders" || md["bootstrapServers"] != "kafka:9092" {
		t.Errorf("trigger metadata %v, want the worker's group, input topic and brokers", md)
	}
	if sts.Spec.Replicas != nil {
		t.Errorf("StatefulSet replicas %d with KEDA on: an upgrade would reset what KEDA set", *sts.Spec.Replicas)
	}
}

// TestPods: the probes, the named ports, the security settings and the
// worker's PodDisruptionBudget.
func TestPods(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			for name, pod := range workloadPods(r) {
				if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
					t.Errorf("%s: pod not runAsNonRoot", name)
				}
				for _, c := range pod.Containers {
					sc := c.SecurityContext
					if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
						sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
						sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
						t.Errorf("%s %s: securityContext %+v, want non-root, read-only root, no privilege escalation", name, c.Name, sc)
					}
					if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
						t.Errorf("%s %s: resources %+v, want a CPU request and a memory limit", name, c.Name, c.Resources)
					}
					if strings.HasPrefix(name, "Job/") {
						continue
					}
					if len(c.Ports) != 1 || c.Ports[0].Name == "" {
						t.Errorf("%s %s: ports %+v, want one named port", name, c.Name, c.Ports)
						continue
					}
					port := c.Ports[0].Name
					for what, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
						if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != what || p.HTTPGet.Port.String() != port {
							t.Errorf("%s %s: probe %s: %+v, want GET %s on port %s", name, c.Name, what, p, what, port)
						}
					}
				}
			}
			sts := one[*appsv1.StatefulSet](t, r)
			if c := container(t, sts.Spec.Template.Spec, "worker"); c.Ports[0].Name != "metrics" {
				t.Errorf("worker port %q, want metrics", c.Ports[0].Name)
			}
			pdb := one[*policyv1.PodDisruptionBudget](t, r)
			if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels) {
				t.Errorf("PodDisruptionBudget selects %v, the workers are %v", pdb.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels)
			}
		})
	}
}

// TestImageFromAppVersion: the image tag is the chart's appVersion, and
// the repository is the value's.
func TestImageFromAppVersion(t *testing.T) {
	c := loadChart(t)
	r := render(t, map[string]any{"image": map[string]any{"repository": "registry.example/team/flakestream"}})
	want := "registry.example/team/flakestream:" + c.Metadata.AppVersion
	for name, pod := range workloadPods(r) {
		for _, ctr := range pod.Containers {
			if ctr.Image != want {
				t.Errorf("%s %s: image %s, want %s", name, ctr.Name, ctr.Image, want)
			}
		}
	}
}

func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// TestLanes: the worker's lanes as rendered into its config file. auto
// stays auto without an autoscaler; with one, it becomes the lanes that
// give every lane a partition at maxReplicas (at most the worker's cap of
// 4); a number stays as given.
func TestLanes(t *testing.T) {
	keda := func(partitions, maxReplicas int, lanes any) map[string]any {
		v := map[string]any{"autoscaling": map[string]any{"inputPartitions": partitions, "maxReplicas": maxReplicas, "keda": map[string]any{"enabled": true}}}
		if lanes != nil {
			v["worker"] = map[string]any{"config": map[string]any{"lanes": lanes}}
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"defaults", map[string]any{}, "auto"},
		{"a number", map[string]any{"worker": map[string]any{"config": map[string]any{"lanes": 3}}}, "3"},
		{"KEDA, 8 partitions, 4 pods", keda(8, 4, nil), "2"},
		{"KEDA, 7 partitions, 4 pods", keda(7, 4, "auto"), "1"},
		{"KEDA, 64 partitions, 4 pods", keda(64, 4, nil), "4"},
		{"KEDA and a number", keda(8, 2, 3), "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			found := false
			for _, cm := range all[*corev1.ConfigMap](r) {
				data, ok := cm.Data["worker.yaml"]
				if !ok {
					continue
				}
				found = true
				var cfg map[string]any
				if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(cfg["lanes"]); got != tc.want {
					t.Errorf("worker.yaml lanes %q, want %q:\n%s", got, tc.want, data)
				}
			}
			if !found {
				t.Fatal("no worker.yaml rendered")
			}
		})
	}
}
