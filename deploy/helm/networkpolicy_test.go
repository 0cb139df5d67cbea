package helm

import (
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// The NetworkPolicy is off by default (the chart cannot know where Kafka,
// Redis and the registry are). On, it selects every pod of the release,
// lets in only the metrics ports from networkPolicy.metricsFrom, and lets
// out only DNS and the ports of Kafka, Redis and the registry; with no one
// allowed to scrape, it does not render.
func TestNetworkPolicy(t *testing.T) {
	if n := len(all[*networkingv1.NetworkPolicy](render(t, nil))); n != 0 {
		t.Errorf("defaults render %d NetworkPolicies, want none", n)
	}
	r := render(t, allOn())
	nps := all[*networkingv1.NetworkPolicy](r)
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(nps))
	}
	np := nps[0]
	podLabels := map[string]map[string]string{}
	for _, s := range all[*appsv1.StatefulSet](r) {
		podLabels["StatefulSet/"+s.Name] = s.Spec.Template.Labels
	}
	for _, d := range all[*appsv1.Deployment](r) {
		podLabels["Deployment/"+d.Name] = d.Spec.Template.Labels
	}
	for _, j := range all[*batchv1.Job](r) {
		podLabels["Job/"+j.Name] = j.Spec.Template.Labels
	}
	if len(podLabels) != 3 {
		t.Errorf("pods %v, want the worker, the audit and the replay", podLabels)
	}
	for name, labels := range podLabels {
		for k, v := range np.Spec.PodSelector.MatchLabels {
			if labels[k] != v {
				t.Errorf("the policy does not select %s: %s=%q, pod has %q", name, k, v, labels[k])
			}
		}
	}
	if len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("policy types %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) == 0 {
		t.Fatalf("ingress %+v, want one rule from metricsFrom", np.Spec.Ingress)
	}
	var in []int
	for _, p := range np.Spec.Ingress[0].Ports {
		in = append(in, p.Port.IntValue())
	}
	if len(in) != 2 || in[0] != 9464 || in[1] != 9465 {
		t.Errorf("ingress ports %v, want the worker's and the audit's metrics ports 9464 and 9465", in)
	}
	out := map[int]bool{}
	for _, e := range np.Spec.Egress {
		for _, p := range e.Ports {
			out[p.Port.IntValue()] = true
		}
	}
	for _, p := range []int{53, 9092, 9093, 6379, 26379, 8081} {
		if !out[p] {
			t.Errorf("egress lacks port %d: %v", p, out)
		}
	}
	if len(out) != 6 {
		t.Errorf("egress ports %v, want only DNS, Kafka, Redis and the registry", out)
	}

	v := allOn()
	v["networkPolicy"] = map[string]any{"enabled": true, "metricsFrom": []any{}}
	if _, err := renderChart(loadChart(t), v); err == nil || !strings.Contains(err.Error(), "networkPolicy.metricsFrom is empty") {
		t.Errorf("empty metricsFrom: %v, want a render error naming it", err)
	}
}

// Every flag of flakestream whose name says it takes a secret (read from
// internal/cli/testdata/flags.golden, with the pattern the CLI's leak test
// uses) is refused as a key of any config map of the chart, so a new
// secret flag cannot be rendered into a ConfigMap.
func TestEverySecretFlagRefused(t *testing.T) {
	secretName := regexp.MustCompile(`password|secret|passphrase|credential|(^|-)token$`)
	c := loadChart(t)
	seen := map[string]bool{}
	for _, flags := range readGolden(t) {
		for name := range flags {
			if !secretName.MatchString(name) || seen[name] {
				continue
			}
			seen[name] = true
			v := map[string]any{"common": map[string]any{"config": map[string]any{name: secretSentinel}}}
			if _, err := renderChart(c, v); err == nil || !strings.Contains(err.Error(), "common.config."+name) {
				t.Errorf("common.config.%s: %v, want a render error naming it", name, err)
			}
		}
	}
	for _, name := range []string{"sasl-password", "schema-registry-password", "sasl-oauth-client-secret"} {
		if !seen[name] {
			t.Errorf("--%s is not among the secret flags found", name)
		}
	}
}
