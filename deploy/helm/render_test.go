package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "flakestream"

const (
	releaseName = "flakestream"
	namespace   = "orders"
)

// allOn turns every optional part of the chart on: replay, KEDA, the
// ServiceMonitor, the PrometheusRule, the dashboard, and passwords from a
// Secret. allOnAlt is the other side of each either-or: the HPA and the
// PodMonitor.
func allOn() map[string]any {
	return map[string]any{
		"secret": map[string]any{
			"name": "flakestream-secrets", "saslPasswordKey": "sasl-password",
			"redisURLKey": "redis-url", "schemaRegistryPasswordKey": "registry-password", "oauthClientSecretKey": "oauth-client-secret",
		},
		"networkPolicy": map[string]any{"enabled": true},
		"common": map[string]any{"config": map[string]any{
			"sasl-mechanism": "scram-sha-512", "sasl-user": "flakestream", "kafka-tls": true,
		}},
		"replay": map[string]any{"enabled": true},
		"autoscaling": map[string]any{
			"inputPartitions": 8, "minReplicas": 2, "maxReplicas": 8,
			"keda": map[string]any{"enabled": true, "authenticationRef": "kafka-sasl", "extraMetadata": map[string]any{"sasl": "scram_sha512", "tls": "enable"}},
		},
		"monitoring": map[string]any{
			"serviceMonitor":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"prometheusRule":   map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true, "folder": "flakestream"},
		},
	}
}

func allOnAlt() map[string]any {
	v := allOn()
	v["autoscaling"] = map[string]any{"inputPartitions": 8, "maxReplicas": 6, "hpa": map[string]any{"enabled": true}}
	v["monitoring"] = map[string]any{
		"podMonitor":     map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	}
	return v
}

// valueSets are the renders every test looks at.
var valueSets = []struct {
	name   string
	values func() map[string]any
}{
	{"defaults", func() map[string]any { return nil }},
	{"all-on", allOn},
	{"all-on-alt", allOnAlt},
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

func renderChart(c *chart.Chart, values map[string]any) (map[string]string, error) {
	return Render(c, values, Release{Name: releaseName, Namespace: namespace})
}

// object is one rendered document, decoded into its Go type.
type object struct {
	source string // template and position
	kind   string
	name   string
	obj    any
}

// rendered holds every object of one render.
type rendered []object

// render renders the chart with values and decodes every document
// strictly; a failure of either fails the test.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	return renderOf(t, loadChart(t), values)
}

func renderOf(t *testing.T, c *chart.Chart, values map[string]any) rendered {
	t.Helper()
	out, err := renderChart(c, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var objs rendered
	for _, d := range Documents(out) {
		if strings.TrimSpace(stripComments(d.Body)) == "" {
			continue
		}
		o, err := decodeStrict([]byte(d.Body))
		if err != nil {
			t.Fatalf("%s (%s): %v\n%s", d.Source, d.Key, err, d.Body)
		}
		o.source = d.Source
		objs = append(objs, o)
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// decodeStrict decodes one manifest into the Go type of its apiVersion
// and kind; an unknown or misspelled field, a duplicate field or a kind
// the chart should not render is an error.
func decodeStrict(doc []byte) (object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return object{}, err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "apps/v1/StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "batch/v1/Job":
		obj = &batchv1.Job{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PodMonitor":
		obj = &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
	case "keda.sh/v1alpha1/ScaledObject":
		so, err := decodeScaledObject(doc)
		if err != nil {
			return object{}, err
		}
		obj = so
	default:
		return object{}, fmt.Errorf("no Go type for apiVersion %q kind %q", tm.APIVersion, tm.Kind)
	}
	if _, ok := obj.(*scaledObject); !ok {
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return object{}, fmt.Errorf("%s: %w", tm.Kind, err)
		}
	}
	var meta struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return object{}, err
	}
	if meta.Metadata.Name == "" {
		return object{}, fmt.Errorf("%s without metadata.name", tm.Kind)
	}
	return object{kind: tm.Kind, name: meta.Metadata.Name, obj: obj}, nil
}

// all returns the objects of kind k.
func all[T any](r rendered) []T {
	var out []T
	for _, o := range r {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the single object of type T, failing the test if there is
// not exactly one.
func one[T any](t *testing.T, r rendered) T {
	t.Helper()
	v := all[T](r)
	if len(v) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(v), zero)
	}
	return v[0]
}

// workloadPods are the pod templates of every workload rendered, by name.
func workloadPods(r rendered) map[string]corev1.PodSpec {
	pods := map[string]corev1.PodSpec{}
	for _, s := range all[*appsv1.StatefulSet](r) {
		pods["StatefulSet/"+s.Name] = s.Spec.Template.Spec
	}
	for _, d := range all[*appsv1.Deployment](r) {
		pods["Deployment/"+d.Name] = d.Spec.Template.Spec
	}
	for _, j := range all[*batchv1.Job](r) {
		pods["Job/"+j.Name] = j.Spec.Template.Spec
	}
	return pods
}

// configFile returns the parsed --config file a container reads: its
// path from the args, resolved through the pod's volumes to a key of a
// rendered ConfigMap.
func configFile(t *testing.T, r rendered, pod corev1.PodSpec, c corev1.Container) (string, map[string]any) {
	t.Helper()
	var file string
	for i, a := range c.Args {
		if a == "--config" && i+1 < len(c.Args) {
			file = c.Args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--config="); ok {
			file = v
		}
	}
	if file == "" {
		t.Fatalf("container %s: no --config in %q", c.Name, c.Args)
	}
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			key := rel
			for _, it := range v.ConfigMap.Items {
				if it.Path == rel {
					key = it.Key
				}
			}
			for _, cm := range all[*corev1.ConfigMap](r) {
				if cm.Name != v.ConfigMap.Name {
					continue
				}
				data, ok := cm.Data[key]
				if !ok {
					t.Fatalf("container %s reads %s: ConfigMap %s has no key %s", c.Name, file, cm.Name, key)
				}
				var cfg map[string]any
				if err := yaml.UnmarshalStrict([]byte(data), &cfg); err != nil {
					t.Fatalf("ConfigMap %s key %s: %v", cm.Name, key, err)
				}
				return cm.Name + "/" + key, cfg
			}
			t.Fatalf("container %s: volume %s names ConfigMap %s, which is not rendered", c.Name, v.Name, v.ConfigMap.Name)
		}
	}
	t.Fatalf("container %s: %s is on no ConfigMap volume", c.Name, file)
	return "", nil
}

// readRepoFile reads a file of the repository (this module is deploy/helm).
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(path.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual compares two values by their JSON form.
func jsonEqual(a, b any) (bool, string, string) {
	ja, _ := json.MarshalIndent(a, "", " ")
	jb, _ := json.MarshalIndent(b, "", " ")
	return bytes.Equal(ja, jb), string(ja), string(jb)
}
