package helm

// The chart on a real API server, through Helm 4's Go SDK: install,
// upgrade, rollback, scaling, eviction and uninstall (the environment is
// k8s_env_test.go's).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// checkReady checks what the wait promised: every StatefulSet and
// Deployment of the release has its replicas ready on the current
// revision, every Job is complete.
func (c *cluster) checkReady(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := ctxFor(t)
	var workloads int
	for _, o := range objs {
		switch o.GetKind() {
		case "StatefulSet":
			s, err := c.cs.AppsV1().StatefulSets(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := int32(1)
			if s.Spec.Replicas != nil {
				want = *s.Spec.Replicas
			}
			if s.Status.ReadyReplicas != want || s.Status.UpdatedReplicas != want || s.Status.CurrentRevision != s.Status.UpdateRevision {
				t.Errorf("StatefulSet %s: %d ready, %d updated of %d, revision %s -> %s", s.Name,
					s.Status.ReadyReplicas, s.Status.UpdatedReplicas, want, s.Status.CurrentRevision, s.Status.UpdateRevision)
			}
			workloads++
		case "Deployment":
			d, err := c.cs.AppsV1().Deployments(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Spec.Replicas == nil || d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
				t.Errorf("Deployment %s: %d ready, %d updated of %v", d.Name, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Spec.Replicas)
			}
			workloads++
		case "Job":
			j, err := c.cs.BatchV1().Jobs(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !jobComplete(j) {
				t.Errorf("Job %s: not complete: %+v", j.Name, j.Status)
			}
			workloads++
		}
	}
	if workloads == 0 {
		t.Fatal("the release has no workload")
	}
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func kinds(objs []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.GetKind()] = true
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// secretFor creates the Secret the all-on values name.
func (c *cluster) secretFor(t *testing.T, ns string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "flakestream-secrets"},
		StringData: map[string]string{
			"sasl-password": "test", "redis-url": "redis://redis:6379/0", "registry-password": "test",
		},
	}
	if _, err := c.cs.CoreV1().Secrets(ns).Create(ctxFor(t), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestK8sInstall installs each value set of the render tests (the
// defaults, and every optional part on, both ways, the NetworkPolicy
// included) with Helm 4, waits
// until the StatefulSet, the Deployment and the replay Job are ready or
// complete, checks each object once more under strict field validation,
// and uninstalls, leaving nothing of the release behind.
func TestK8sInstall(t *testing.T) {
	c := kubeCluster(t)
	c.applyCRDs(t)
	ch := loadChart(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			ns := c.namespace(t, "fs-install")
			c.secretFor(t, ns)
			rel, err := c.install(t, ch, ns, releaseName, vs.values())
			if err != nil {
				t.Fatalf("helm install: %v", err)
			}
			objs := manifestObjects(t, rel.Manifest)
			// The kinds TestRender pins (the NetworkPolicy in both all-on
			// sets) are the kinds installed.
			var want []string
			for _, o := range render(t, vs.values()) {
				if !slices.Contains(want, o.kind) {
					want = append(want, o.kind)
				}
			}
			sort.Strings(want)
			if got := kinds(objs); !slices.Equal(got, want) {
				t.Errorf("installed kinds %v, rendered %v", got, want)
			}
			c.checkReady(t, ns, objs)
			c.strictDryRun(t, ns, objs)
			c.uninstall(t, ns, releaseName)
			c.checkGone(t, ns, objs)
		})
	}
}

// checkGone: after an uninstall, none of the release's objects, none of
// their pods, ReplicaSets, ControllerRevisions or EndpointSlices and no
// Helm release record is left in ns. What Kubernetes itself puts in every
// namespace (the default ServiceAccount, kube-root-ca.crt) and Events are
// not the release's.
func (c *cluster) checkGone(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetNamespace(ns)
		_, err := c.resource(t, o).Get(ctxFor(t), o.GetName(), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s %s: still there after uninstall (err %v)", o.GetKind(), o.GetName(), err)
		}
	}
	var left []string
	c.waitFor(t, "nothing left in "+ns, func(ctx context.Context) (bool, error) {
		var err error
		left, err = c.leftovers(ctx, ns)
		return len(left) == 0, err
	})
	if len(left) > 0 {
		t.Errorf("left in %s after uninstall: %v", ns, left)
	}
}

// leftovers lists every namespaced object in ns but Events, the default
// ServiceAccount, kube-root-ca.crt and the Secret the test made.
func (c *cluster) leftovers(ctx context.Context, ns string) ([]string, error) {
	lists, err := c.cs.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return nil, err
	}
	var left []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Name == "events" || strings.Contains(r.Name, "/") {
				continue
			}
			items, err := c.dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", r.Name, err)
			}
			for _, it := range items.Items {
				k, n := it.GetKind(), it.GetName()
				if (k == "ServiceAccount" && n == "default") || (k == "ConfigMap" && n == "kube-root-ca.crt") ||
					(k == "Secret" && n == "flakestream-secrets") {
					continue
				}
				left = append(left, k+"/"+n)
			}
		}
	}
	return left, nil
}

// TestK8sRefused: the values the render refuses (TestRenderRefuses) fail a
// real install with the same message, and leave no release behind.
func TestK8sRefused(t *testing.T) {
	c := kubeCluster(t)
	ch := loadChart(t)
	ns := c.namespace(t, "fs-refused")
	for _, tc := range refusedValues() {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.install(t, ch, ns, "refused", tc.values)
			if err == nil {
				t.Fatalf("installed; want an error naming %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
	left, err := c.leftovers(ctxFor(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("refused installs left %v", left)
	}
}

// podEvent is a worker pod's deletion or readiness, in the order the API
// server reported them.
type podEvent struct {
	pod   string
	event string // "deleted" or "ready"
}

// watchPods records the deletions of pods matching sel, and the moments
// a new pod of that name became ready, until stop is called.
func (c *cluster) watchPods(t *testing.T, ns, sel string) (stop func() []podEvent) {
	t.Helper()
	w, err := c.cs.CoreV1().Pods(ns).Watch(ctxFor(t), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []podEvent
		done   = make(chan struct{})
	)
	ready := map[string]bool{} // by UID
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			switch {
			case ev.Type == watch.Deleted:
				events = append(events, podEvent{p.Name, "deleted"})
			case p.DeletionTimestamp == nil && podReady(p) && !ready[string(p.UID)]:
				ready[string(p.UID)] = true
				events = append(events, podEvent{p.Name, "ready"})
			}
			mu.Unlock()
		}
	}()
	return func() []podEvent {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return events
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

const workerSelector = "app.kubernetes.io/component=worker"

// TestK8sLifecycle: install with 3 workers, upgrade a value of the worker's
// configuration (a rolling update, highest ordinal first, each pod replaced
// only after the one before is ready), the PodDisruptionBudget on the
// Eviction API, roll back to the first revision, scale 1 -> 3, uninstall.
func TestK8sLifecycle(t *testing.T) {
	c := kubeCluster(t)
	ch := loadChart(t)
	ns := c.namespace(t, "fs-lifecycle")
	rel, err := c.install(t, ch, ns, releaseName, map[string]any{"worker": map[string]any{"replicas": 3}})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	objs := manifestObjects(t, rel.Manifest)
	c.checkReady(t, ns, objs)
	stsName := releaseName + "-worker"
	before := c.sts(t, ns, stsName)

	t.Run("upgrade rolls in StatefulSet order", func(t *testing.T) {
		stop := c.watchPods(t, ns, workerSelector)
		up := c.upgrade(t, ch, ns, releaseName, map[string]any{"worker": map[string]any{"config": map[string]any{"session-timeout": "20s"}}})
		c.checkReady(t, ns, manifestObjects(t, up.Manifest))
		cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctxFor(t), releaseName+"-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w := cm.Data["worker.yaml"]; !strings.Contains(w, "session-timeout: 20s") {
			t.Errorf("ConfigMap %s worker.yaml after upgrade, want session-timeout: 20s:\n%s", cm.Name, w)
		}
		events := stop()
		after := c.sts(t, ns, stsName)
		if after.Status.CurrentRevision == before.Status.CurrentRevision {
			t.Fatalf("the upgrade left the pod template as it was (revision %s)", after.Status.CurrentRevision)
		}
		var deleted []string
		for _, e := range events {
			if e.event == "deleted" {
				deleted = append(deleted, e.pod)
			}
		}
		want := []string{stsName + "-2", stsName + "-1", stsName + "-0"}
		if !slices.Equal(deleted, want) {
			t.Errorf("pods replaced in the order %v, want %v (events %v)", deleted, want, events)
		}
		// Each replacement is ready before the next pod goes.
		for i := 0; i+1 < len(want); i++ {
			readyAt := slices.Index(events, podEvent{want[i], "ready"})
			nextGone := slices.Index(events, podEvent{want[i+1], "deleted"})
			if readyAt < 0 || nextGone < readyAt {
				t.Errorf("%s deleted before the new %s was ready: %v", want[i+1], want[i], events)
			}
		}
		c.checkRevisionPods(t, ns, after)
	})

	t.Run("PodDisruptionBudget on eviction", func(t *testing.T) {
		c.checkEviction(t, ns, stsName)
	})

	t.Run("rollback", func(t *testing.T) {
		rb := action.NewRollback(c.helm(t, ns))
		rb.Version = 1
		rb.WaitStrategy, rb.Timeout = helmkube.StatusWatcherStrategy, k8sTimeout
		if err := rb.Run(releaseName); err != nil {
			t.Fatalf("helm rollback: %v", err)
		}
		c.waitFor(t, "the rollback's rolling update", func(ctx context.Context) (bool, error) {
			s, err := c.cs.AppsV1().StatefulSets(ns).Get(ctx, stsName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return s.Status.CurrentRevision == s.Status.UpdateRevision && s.Status.UpdatedReplicas == 3 && s.Status.ReadyReplicas == 3, nil
		})
		after := c.sts(t, ns, stsName)
		if after.Status.CurrentRevision != before.Status.CurrentRevision {
			t.Errorf("after rollback: revision %s, want the first one, %s", after.Status.CurrentRevision, before.Status.CurrentRevision)
		}
		cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctxFor(t), releaseName+"-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w := cm.Data["worker.yaml"]; !strings.Contains(w, "session-timeout: 10s") {
			t.Errorf("ConfigMap %s worker.yaml after rollback, want the first revision's session-timeout: 10s:\n%s", cm.Name, w)
		}
		h := action.NewHistory(c.helm(t, ns))
		revs, err := h.Run(releaseName)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != 3 {
			t.Errorf("history has %d revisions, want 3 (install, upgrade, rollback)", len(revs))
		}
	})

	t.Run("scale 1 to 3", func(t *testing.T) {
		c.upgrade(t, ch, ns, releaseName, map[string]any{"worker": map[string]any{"replicas": 1}})
		c.waitFor(t, "1 worker", func(ctx context.Context) (bool, error) {
			pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workerSelector})
			return err == nil && len(pods.Items) == 1, err
		})
		up := c.upgrade(t, ch, ns, releaseName, map[string]any{"worker": map[string]any{"replicas": 3}})
		c.checkReady(t, ns, manifestObjects(t, up.Manifest))
		pods, err := c.cs.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: workerSelector})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			if podReady(&p) {
				names = append(names, p.Name)
			}
		}
		sort.Strings(names)
		if want := []string{stsName + "-0", stsName + "-1", stsName + "-2"}; !slices.Equal(names, want) {
			t.Errorf("ready workers %v, want %v", names, want)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		c.uninstall(t, ns, releaseName)
		c.checkGone(t, ns, objs)
	})
}

func (c *cluster) sts(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	s, err := c.cs.AppsV1().StatefulSets(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRevisionPods: every worker pod runs the StatefulSet's revision.
func (c *cluster) checkRevisionPods(t *testing.T, ns string, s *appsv1.StatefulSet) {
	t.Helper()
	pods, err := c.cs.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: workerSelector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if rev := p.Labels[appsv1.StatefulSetRevisionLabel]; rev != s.Status.UpdateRevision {
			t.Errorf("pod %s on revision %s, want %s", p.Name, rev, s.Status.UpdateRevision)
		}
	}
}

// checkEviction: with every worker ready the budget (maxUnavailable 1)
// allows one eviction; with one worker not ready it allows none, and the
// Eviction API refuses with 429.
func (c *cluster) checkEviction(t *testing.T, ns, stsName string) {
	t.Helper()
	pdbName := stsName
	budget := func(want int32) {
		c.waitFor(t, fmt.Sprintf("PodDisruptionBudget %s allowing %d", pdbName, want), func(ctx context.Context) (bool, error) {
			p, err := c.cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdbName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == want, nil
		})
	}
	evict := func(pod string) error {
		return c.cs.PolicyV1().Evictions(ns).Evict(ctxFor(t), &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
		})
	}
	setReady := func(pod string, status corev1.ConditionStatus) {
		p, err := c.cs.CoreV1().Pods(ns).Get(ctxFor(t), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = status
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = status == corev1.ConditionTrue
		}
		if _, err := c.cs.CoreV1().Pods(ns).UpdateStatus(ctxFor(t), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	budget(1)
	// There is no kubelet: the test plays one and reports worker 0 not
	// ready, as a failing readiness probe would.
	setReady(stsName+"-0", corev1.ConditionFalse)
	budget(0)
	err := evict(stsName + "-1")
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting %s-1 with %s-0 not ready: %v, want 429 Too Many Requests (the budget)", stsName, stsName, err)
	}
	setReady(stsName+"-0", corev1.ConditionTrue)
	budget(1)
	if err := evict(stsName + "-1"); err != nil {
		t.Fatalf("evicting %s-1 with every worker ready: %v", stsName, err)
	}
	c.waitFor(t, "the evicted worker back", func(ctx context.Context) (bool, error) {
		s, err := c.cs.AppsV1().StatefulSets(ns).Get(ctx, stsName, metav1.GetOptions{})
		return err == nil && s.Status.ReadyReplicas == 3, err
	})
}

// refusedValues are TestRenderRefuses' cases.
func refusedValues() []refusal {
	return append(slices.Clone(renderRefusals), secretRefusals()...)
}
