package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// KafkaKindCluster is a KafkaCluster of several Apache Kafka nodes started
// here by `scripts/kafka-local start --nodes N`.
const KafkaKindCluster = "cluster"

// RealKafkaCluster starts a cluster of nodes Apache Kafka nodes of t's own
// with scripts/kafka-local (each broker and controller, node N with node.id
// N; topics default to replication factor 3 and min.insync.replicas 2) and
// stops it at the end of t. Its nodes can be stopped, killed and started
// again (StopNode, KillNode, StartNode) and paused (NodePID). With
// KafkaClientListener every node has a second client listener too
// (ClientAddrs, one per node). Without java or the jars it skips t with a
// one-line reason; under CI=true it fails t instead.
func RealKafkaCluster(t testing.TB, nodes int, opts ...KafkaOpt) *KafkaCluster {
	t.Helper()
	cfg := kafkaApply(opts)
	if nodes < 2 || nodes > 9 {
		t.Fatalf("testenv: a cluster of %d nodes: want 2 to 9", nodes)
	}
	if why := kafkaLocalUnavailable(); why != "" {
		why = "no Apache Kafka cluster: " + why
		if kafkaCI() {
			t.Fatalf("testenv: %s (CI=true)", why)
		}
		t.Skipf("testenv: %s", why)
	}
	dir := t.TempDir()
	c := &KafkaCluster{Kind: KafkaKindCluster, nodes: nodes, pidFile: filepath.Join(dir, "kafka-local.pid"),
		logPath: filepath.Join(dir, "kafka-local.out"), replicas: int16(min(nodes, 3))}
	// --watch-pid: the cluster stops within a second or two of this process.
	args := []string{"start", "--nodes", strconv.Itoa(nodes), "--pid-file", c.pidFile,
		"--timeout", kafkaTestTimeout(t), "--watch-pid", strconv.Itoa(os.Getpid())}
	if cfg.clientListener {
		args = append(args, "--client-listeners")
	}
	if cfg.nodeCgroups {
		args = append(args, "--cgroups")
	}
	args = append(args, cfg.secureArgs()...)
	out, err := c.script(20*time.Minute, args...)
	if err != nil {
		t.Fatalf("testenv: start a %d-node Kafka cluster: %v", nodes, err)
	}
	if cfg.secure != "" {
		s, addrs, err := parseKafkaSecure(out)
		if err != nil {
			t.Fatalf("testenv: secured kafka: %v", err)
		}
		c.secure, out = s, strings.Join(addrs, ",")
	}
	for _, a := range strings.Split(out, ",") {
		c.Addrs = append(c.Addrs, strings.TrimSpace(a))
	}
	if len(c.Addrs) != nodes {
		t.Fatalf("testenv: kafka-local start --nodes %d printed %q", nodes, out)
	}
	if cfg.clientListener {
		ports := strings.Fields(c.clusterEnv(t)["KC_CLIENT_PORTS"])
		if len(ports) != nodes {
			t.Fatalf("testenv: the cluster has client ports %v, want %d", ports, nodes)
		}
		for _, p := range ports {
			c.ClientAddrs = append(c.ClientAddrs, "127.0.0.1:"+p)
		}
	}
	t.Cleanup(func() {
		// The data goes away with the cluster, so the nodes are killed
		// first: a controlled shutdown of all of them at once waits for a
		// quorum that the first ones to stop take away (up to 30 s each).
		for n := 1; n <= nodes; n++ {
			if _, err := c.script(time.Minute, "node", "stop", strconv.Itoa(n), "--pid-file", c.pidFile, "--signal", "KILL"); err != nil {
				t.Logf("testenv: kill node %d: %v", n, err)
			}
		}
		if _, err := c.script(3*time.Minute, "stop", "--pid-file", c.pidFile); err != nil {
			t.Errorf("testenv: stop the Kafka cluster: %v", err)
		}
	})
	t.Logf("testenv: started a %d-node Apache Kafka cluster at %s (log %s)", nodes, strings.Join(c.Addrs, ","), c.logPath)
	return c
}

// Nodes is the number of nodes of a cluster from RealKafkaCluster (node
// IDs 1 to Nodes), else 1.
func (c *KafkaCluster) Nodes() int { return max(c.nodes, 1) }

// NodeAddr returns the address of node n (1-based) of a cluster.
func (c *KafkaCluster) NodeAddr(n int) string { return c.Addrs[n-1] }

// clusterDir is the cluster's data dir, named on the second line of its
// pid file.
func (c *KafkaCluster) clusterDir(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(c.pidFile)
	lines := strings.Split(string(b), "\n")
	if err != nil || len(lines) < 2 || strings.TrimSpace(lines[1]) == "" {
		t.Fatalf("testenv: no cluster dir in %s (%v)", c.pidFile, err)
	}
	return strings.TrimSpace(lines[1])
}

// clusterEnv reads the cluster's cluster.env (KEY=value lines, values
// maybe quoted).
func (c *KafkaCluster) clusterEnv(t testing.TB) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.clusterDir(t), "cluster.env"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

// NodeCgroup returns the cgroup v2 path (relative to the cgroup2 root)
// that node n's JVM runs in, for DropFromCgroup; the cluster must have been
// started with KafkaNodeCgroups.
func (c *KafkaCluster) NodeCgroup(t testing.TB, n int) string {
	t.Helper()
	c.checkNode(t, n)
	prefix := c.clusterEnv(t)["KC_CGROUP"]
	if prefix == "" {
		t.Fatal("testenv: the cluster's nodes have no cgroups; start it with KafkaNodeCgroups")
	}
	return prefix + "-node" + strconv.Itoa(n)
}

// NodePorts returns node n's broker (PLAINTEXT: clients and replication)
// and controller ports.
func (c *KafkaCluster) NodePorts(t testing.TB, n int) (broker, controller int) {
	t.Helper()
	c.checkNode(t, n)
	env := c.clusterEnv(t)
	bp, err1 := strconv.Atoi(strings.Fields(env["KC_PORTS"])[n-1])
	cp, err2 := strconv.Atoi(strings.Fields(env["KC_CPORTS"])[n-1])
	if err1 != nil || err2 != nil {
		t.Fatalf("testenv: ports of node %d in cluster.env: %q, %q", n, env["KC_PORTS"], env["KC_CPORTS"])
	}
	return bp, cp
}

// NodePID returns the pid of node n's JVM, for pausing it with SIGSTOP.
func (c *KafkaCluster) NodePID(t testing.TB, n int) int {
	t.Helper()
	c.checkNode(t, n)
	props := filepath.Join(c.clusterDir(t), "node"+strconv.Itoa(n), "server.properties")
	pid := jvmPID(props)
	if pid == 0 {
		t.Fatalf("testenv: no JVM runs %s", props)
	}
	return pid
}

// StopNode stops node n of a cluster cleanly (SIGTERM: a controlled
// shutdown that moves its leaderships away first).
func (c *KafkaCluster) StopNode(t testing.TB, n int) { c.nodeStop(t, n, "TERM") }

// KillNode kills node n's JVM with SIGKILL (a crash: no controlled
// shutdown, unflushed page cache kept by the OS, data dir kept).
func (c *KafkaCluster) KillNode(t testing.TB, n int) { c.nodeStop(t, n, "KILL") }

func (c *KafkaCluster) nodeStop(t testing.TB, n int, sig string) {
	t.Helper()
	c.checkNode(t, n)
	if _, err := c.script(3*time.Minute, "node", "stop", strconv.Itoa(n), "--pid-file", c.pidFile, "--signal", sig); err != nil {
		t.Fatalf("testenv: stop node %d (%s): %v", n, sig, err)
	}
}

// StartNode starts node n again on its ports and data, and returns once it
// accepts requests.
func (c *KafkaCluster) StartNode(t testing.TB, n int) {
	t.Helper()
	c.checkNode(t, n)
	out, err := c.script(6*time.Minute, "node", "start", strconv.Itoa(n), "--pid-file", c.pidFile)
	if err != nil {
		t.Fatalf("testenv: start node %d: %v", n, err)
	}
	if out != c.Addrs[n-1] {
		t.Fatalf("testenv: node %d came back at %q, not %s", n, out, c.Addrs[n-1])
	}
}

func (c *KafkaCluster) checkNode(t testing.TB, n int) {
	t.Helper()
	if c.Kind != KafkaKindCluster {
		t.Fatalf("testenv: a %s Kafka has no nodes to stop; use RealKafkaCluster", c.Kind)
	}
	if n < 1 || n > c.nodes {
		t.Fatalf("testenv: no node %d in a %d-node cluster", n, c.nodes)
	}
}

// script runs scripts/kafka-local with args, bounded by timeout, and returns
// its stdout (trimmed); its stderr is appended to the cluster's log.
func (c *KafkaCluster) script(timeout time.Duration, args ...string) (string, error) {
	path, err := kafkaScript()
	if err != nil {
		return "", err
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stderr = logf
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kafka-local %s: %w\n%s", strings.Join(args, " "), err, kafkaTail(c.logPath))
	}
	return strings.TrimSpace(string(out)), nil
}

// TxnCoordinator returns the node that coordinates transactional ID id.
func (c *KafkaCluster) TxnCoordinator(t testing.TB, id string) int {
	t.Helper()
	return c.coordinator(t, "transaction", id, func(ctx context.Context, adm *kadm.Client) (kadm.FindCoordinatorResponses, error) {
		return adm.FindTxnCoordinators(ctx, id), nil
	})
}

// GroupCoordinator returns the node that coordinates consumer group group.
func (c *KafkaCluster) GroupCoordinator(t testing.TB, group string) int {
	t.Helper()
	return c.coordinator(t, "group", group, func(ctx context.Context, adm *kadm.Client) (kadm.FindCoordinatorResponses, error) {
		return adm.FindGroupCoordinators(ctx, group), nil
	})
}

func (c *KafkaCluster) coordinator(t testing.TB, kind, key string, find func(context.Context, *kadm.Client) (kadm.FindCoordinatorResponses, error)) int {
	t.Helper()
	var node int
	c.adminRetry(t, fmt.Sprintf("find the %s coordinator of %q", kind, key), func(ctx context.Context, adm *kadm.Client) error {
		resps, err := find(ctx, adm)
		if err != nil {
			return err
		}
		r, ok := resps[key]
		switch {
		case !ok:
			return fmt.Errorf("no answer for %q", key)
		case r.Err != nil:
			return r.Err
		}
		node = int(r.NodeID)
		return nil
	})
	return node
}

// Leaders returns the leader node of each partition of topic.
func (c *KafkaCluster) Leaders(t testing.TB, topic string) map[int32]int {
	t.Helper()
	var out map[int32]int
	c.adminRetry(t, fmt.Sprintf("leaders of %q", topic), func(ctx context.Context, adm *kadm.Client) error {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			err = md.Topics[topic].Err
		}
		if err != nil {
			return err
		}
		out = map[int32]int{}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err == nil && p.Leader >= 0 {
				out[p.Partition] = int(p.Leader)
			}
		}
		if len(out) == len(md.Topics[topic].Partitions) && len(out) > 0 {
			return nil
		}
		return fmt.Errorf("%d of %d partitions have a leader", len(out), len(md.Topics[topic].Partitions))
	})
	return out
}

// adminRetry calls try with the cluster's admin client and a 10s context
// every 200ms, for up to a minute, until it returns nil; then it fails the
// test with what (the step) and try's last error. Metadata answers lag
// behind a broker that has just started, stopped or moved a leader.
func (c *KafkaCluster) adminRetry(t testing.TB, what string, try func(context.Context, *kadm.Client) error) {
	t.Helper()
	adm := c.Admin(t)
	var last error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		last = try(ctx, adm)
		cancel()
		if last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("testenv: %s: %v", what, last)
}

// WaitInSync waits until every partition of every topic (the internal
// ones too) has all its replicas in sync, as a rolling deploy does before
// it stops the next node, and returns how long that took.
func (c *KafkaCluster) WaitInSync(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	adm := c.Admin(t)
	start := time.Now()
	var why string
	for time.Since(start) < timeout {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		md, err := adm.Metadata(ctx)
		cancel()
		why = ""
		if err != nil {
			why = err.Error()
		}
		for _, td := range md.Topics {
			for _, p := range td.Partitions {
				if why == "" && (p.Err != nil || len(p.ISR) < len(p.Replicas)) {
					why = fmt.Sprintf("%s/%d: ISR %v of replicas %v (%v)", td.Topic, p.Partition, p.ISR, p.Replicas, p.Err)
				}
			}
		}
		if why == "" {
			return time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("testenv: replicas not in sync after %s: %s", timeout, why)
	return 0
}

// KafkaTools returns the directory of Kafka's command-line tools jars
// (org.apache.kafka:kafka-tools of the brokers' version and its runtime
// jars: the console consumer, kafka-transactions, ...), fetched once with
// Maven by `scripts/kafka-local tools`. Run one with
// java -cp DIR/* org.apache.kafka.tools.consumer.ConsoleConsumer ...
func KafkaTools() (string, error) {
	path, err := kafkaScript()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Minute)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, path, "tools")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kafka-local tools: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
