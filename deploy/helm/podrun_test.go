package helm

// The pod spec, run: kwok marks pods Running without running anything, so
// this test runs what each rendered container would run, as a process of
// the real flakestream binary, against a real Kafka broker and
// redis-server: the container's arguments, its environment (values,
// downward API, Secret and ConfigMap keys), its ConfigMap and Secret
// volumes written to a temporary directory at the mount paths' place. A
// chart that renders but that the binary rejects fails here.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
)

// podRunTimeout bounds each process: to ready, and from SIGTERM to exit.
const podRunTimeout = 2 * time.Minute

// podRunEnv returns the Kafka brokers (KAFKA_BROKERS, e.g. from
// scripts/kafka-local start) and redis-server's path, or skips.
func podRunEnv(t *testing.T) (brokers []string, redisServer string) {
	t.Helper()
	why := ""
	b := os.Getenv("KAFKA_BROKERS")
	rs, err := exec.LookPath("redis-server")
	switch {
	case b == "":
		why = "KAFKA_BROKERS not set (scripts/kafka-local start)"
	case err != nil:
		why = "no redis-server on PATH"
	}
	if why != "" {
		if os.Getenv("FLAKESTREAM_REQUIRE_K8S") == "1" {
			t.Fatalf("FLAKESTREAM_REQUIRE_K8S=1: %s", why)
		}
		t.Skip(why)
	}
	return strings.Split(b, ","), rs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// buildFlakestream builds the repository's binary (the module two
// directories up).
func buildFlakestream(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flakestream")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startRedis runs a redis-server of the test's own on 127.0.0.1.
func startRedis(t *testing.T, redisServer string) string {
	t.Helper()
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	cmd := exec.CommandContext(ctx, redisServer, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %d: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port)
}

// createTopics creates the topics the rendered config names (the worker
// treats a missing input topic as fatal, as it should).
func createTopics(t *testing.T, brokers []string, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
}

// TestPodSpecRun renders the chart with the worker, the audit and a replay
// Job on, pointed at the local Kafka and Redis (the Redis URL from a
// Secret, as a production install would have it), and runs each
// container's command: the worker and the audit until /readyz and
// /healthz answer 200 and then a clean SIGTERM exit, the replay Job to a
// successful exit.
func TestPodSpecRun(t *testing.T) {
	brokers, redisServer := podRunEnv(t)
	bin := buildFlakestream(t)
	redisURL := startRedis(t, redisServer)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	topics := map[string]string{
		"in": "podrun-orders-" + suffix, "out": "podrun-numbered-" + suffix, "dlq": "podrun-dlq-" + suffix,
		"audit": "podrun-audit-" + suffix, "retained": "podrun-retained-" + suffix,
	}
	createTopics(t, brokers, topics["in"], topics["out"], topics["dlq"], topics["audit"], topics["retained"])
	values := map[string]any{
		"secret": map[string]any{"name": "flakestream-secrets", "redisURLKey": "redis-url"},
		"common": map[string]any{"config": map[string]any{"brokers": toAny(brokers)}},
		"worker": map[string]any{"port": freePort(t), "config": map[string]any{
			"input-topic": []any{topics["in"]}, "output-topic": topics["out"], "dlq-topic": topics["dlq"],
			"group": "podrun-" + suffix,
		}},
		"audit": map[string]any{"port": freePort(t), "config": map[string]any{
			"input-topic": []any{topics["out"]}, "audit-topic": topics["audit"], "group": "podrun-audit-" + suffix,
		}},
		"replay": map[string]any{"enabled": true, "name": "r" + suffix, "config": map[string]any{
			"input-topic": topics["retained"], "output-topic": topics["out"],
		}},
	}
	secrets := map[string]map[string]string{"flakestream-secrets": {"redis-url": redisURL}}
	r := render(t, values)
	pods := workloadPods(r)
	for _, want := range []string{"StatefulSet/flakestream-worker", "Deployment/flakestream-audit", "Job/flakestream-replay-r" + suffix} {
		if _, ok := pods[want]; !ok {
			t.Fatalf("no %s in the render (have %v)", want, keys(pods))
		}
	}
	for name, pod := range pods {
		for _, c := range pod.Containers {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				kind, obj, _ := strings.Cut(name, "/")
				p := &podProcess{
					t: t, bin: bin, r: r, pod: pod, c: c, secrets: secrets, namespace: namespace,
					podName: podNameFor(kind, obj),
				}
				p.run(kind == "Job")
			})
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// podNameFor is the name a pod of the workload gets: ordinal 0 of a
// StatefulSet, a generated suffix otherwise.
func podNameFor(kind, name string) string {
	switch kind {
	case "StatefulSet":
		return name + "-0"
	case "Deployment":
		return name + "-7d9f8b6c5d-x2k4q"
	}
	return name + "-h7t2p"
}

type podProcess struct {
	t         *testing.T
	bin       string
	r         rendered
	pod       corev1.PodSpec
	c         corev1.Container
	secrets   map[string]map[string]string
	namespace string
	podName   string
	root      string // the container's filesystem: mounts go under it
}

func (p *podProcess) configMap(name string) map[string]string {
	for _, cm := range all[*corev1.ConfigMap](p.r) {
		if cm.Name == name {
			return cm.Data
		}
	}
	p.t.Fatalf("container %s: ConfigMap %s is not rendered", p.c.Name, name)
	return nil
}

func (p *podProcess) secret(name string) map[string]string {
	s, ok := p.secrets[name]
	if !ok {
		p.t.Fatalf("container %s: Secret %s is not one the test made", p.c.Name, name)
	}
	return s
}

// inRoot maps every mount path named in s to its place under root.
func (p *podProcess) inRoot(s string) string {
	for _, m := range p.c.VolumeMounts {
		s = strings.ReplaceAll(s, m.MountPath, filepath.Join(p.root, m.MountPath))
	}
	return s
}

// volumes writes each mounted volume under root.
func (p *podProcess) volumes() {
	t := p.t
	for _, m := range p.c.VolumeMounts {
		var vol *corev1.Volume
		for i := range p.pod.Volumes {
			if p.pod.Volumes[i].Name == m.Name {
				vol = &p.pod.Volumes[i]
			}
		}
		if vol == nil {
			t.Fatalf("mount %s: no volume %s in the pod", m.MountPath, m.Name)
		}
		dir := filepath.Join(p.root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var data map[string]string
		var items []corev1.KeyToPath
		switch {
		case vol.ConfigMap != nil:
			data, items = p.configMap(vol.ConfigMap.Name), vol.ConfigMap.Items
		case vol.Secret != nil:
			data, items = p.secret(vol.Secret.SecretName), vol.Secret.Items
		case vol.EmptyDir != nil:
			continue
		default:
			t.Fatalf("volume %s: a kind this test does not run (%+v)", vol.Name, vol.VolumeSource)
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				t.Fatalf("volume %s: no key %s", vol.Name, it.Key)
			}
			f := filepath.Join(dir, it.Path)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(p.inRoot(v)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) by the variables defined so far, as the kubelet
// does; an unknown reference stays as written.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// env resolves the container's environment.
func (p *podProcess) env() []string {
	t := p.t
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, ef := range p.c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			data = p.configMap(ef.ConfigMapRef.Name)
		case ef.SecretRef != nil:
			data = p.secret(ef.SecretRef.Name)
		}
		for k, v := range data {
			set(ef.Prefix+k, v)
		}
	}
	for _, e := range p.c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, p.inRoot(expand(e.Value, env)))
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				set(e.Name, p.podName)
			case "metadata.namespace":
				set(e.Name, p.namespace)
			default:
				t.Fatalf("env %s: fieldRef %s is not one this test runs", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := p.secret(ref.Name)[ref.Key]
			if !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			set(e.Name, v)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := p.configMap(ref.Name)[ref.Key]
			if !ok {
				t.Fatalf("env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			set(e.Name, v)
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			q, ok := p.c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
			if !ok {
				t.Fatalf("env %s: resource %s has no limit", e.Name, ref.Resource)
			}
			set(e.Name, strconv.FormatInt(q.Value(), 10))
		default:
			t.Fatalf("env %s: a source this test does not run", e.Name)
		}
	}
	// What a container gets besides its own variables: HOSTNAME is the
	// pod's name; HOME is /, here the temporary root.
	out := []string{"PATH=/usr/bin:/bin", "HOME=" + p.root, "HOSTNAME=" + p.podName}
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (p *podProcess) run(toCompletion bool) {
	t := p.t
	if len(p.c.Command) > 0 {
		t.Fatalf("container %s overrides the image's entrypoint with %q: run it by hand", p.c.Name, p.c.Command)
	}
	p.root = t.TempDir()
	p.volumes()
	env := p.env()
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	args := make([]string, len(p.c.Args))
	for i, a := range p.c.Args {
		args[i] = p.inRoot(expand(a, envMap))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*podRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = env
	cmd.Dir = p.root
	if p.c.WorkingDir != "" {
		cmd.Dir = filepath.Join(p.root, p.c.WorkingDir)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Logf("%s: flakestream %s", p.podName, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if toCompletion {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s exited: %v\n%s", p.podName, err, out.String())
			}
		case <-time.After(podRunTimeout):
			t.Fatalf("%s still running after %v\n%s", p.podName, podRunTimeout, out.String())
		}
		return
	}
	for _, probe := range []*corev1.Probe{p.c.ReadinessProbe, p.c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Fatalf("%s: a probe that is not an HTTP GET: %+v", p.c.Name, probe)
		}
		url := fmt.Sprintf("http://127.0.0.1:%d%s", p.port(probe), probe.HTTPGet.Path)
		if err := waitHTTP(url, done); err != nil {
			t.Fatalf("%s: %s: %v\n%s", p.podName, url, err, out.String())
		}
	}
	// As the kubelet stops a pod: SIGTERM, then the grace period.
	grace := 30 * time.Second
	if p.pod.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*p.pod.TerminationGracePeriodSeconds) * time.Second
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: exit after SIGTERM: %v\n%s", p.podName, err, out.String())
		}
	case <-time.After(grace):
		t.Errorf("%s: still running %v after SIGTERM (the grace period)\n%s", p.podName, grace, out.String())
	}
}

// port resolves a probe's port (a name or a number) on the container.
func (p *podProcess) port(probe *corev1.Probe) int {
	hp := probe.HTTPGet.Port
	if hp.StrVal == "" {
		return hp.IntValue()
	}
	for _, cp := range p.c.Ports {
		if cp.Name == hp.StrVal {
			return int(cp.ContainerPort)
		}
	}
	p.t.Fatalf("%s: probe port %q is not a port of the container", p.c.Name, hp.StrVal)
	return 0
}

// waitHTTP polls url until it answers 200, the process exits, or
// podRunTimeout passes.
func waitHTTP(url string, exited <-chan error) error {
	deadline := time.Now().Add(podRunTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the process exited before answering 200: %v", err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not 200 after %v (last: %s)", podRunTimeout, last)
}
