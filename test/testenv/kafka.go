// Kafka for tests. Kafka(t) returns any Kafka a test can use:
// an external broker named by KAFKA_BROKERS, else a real broker started by
// scripts/kafka-local when FLAKESTREAM_KAFKA_LOCAL=1, else an in-process
// kfake cluster. RealKafka(t) returns only a real Apache Kafka broker, or
// skips the test (fails it when CI=true).
//
// Environment:
//
//	KAFKA_BROKERS=host:port[,host:port]  an external broker (e.g. started by
//	                                     .ci/run with scripts/kafka-local start)
//	FLAKESTREAM_KAFKA_LOCAL=1            start real brokers with
//	                                     scripts/kafka-local (fetching the jars
//	                                     with Maven if they are not cached);
//	                                     Kafka(t) then prefers them to kfake
//	FLAKESTREAM_KAFKA_LOCAL=0            never start one
//	(unset)                              RealKafka starts one only if java is
//	                                     installed and the jars are cached
//	CI=true                              a missing real broker fails the test
//	KAFKA_VERSION, FLAKESTREAM_CACHE     passed on to scripts/kafka-local

package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kinds of KafkaCluster.
const (
	KafkaKindFake     = "kfake"    // in-process github.com/twmb/franz-go/pkg/kfake
	KafkaKindExternal = "external" // KAFKA_BROKERS: started by someone else
	KafkaKindLocal    = "local"    // Apache Kafka started here by scripts/kafka-local
	// KafkaKindCluster (kafka_cluster.go): several nodes from scripts/kafka-local
)

// KafkaCluster is a Kafka cluster for a test.
type KafkaCluster struct {
	Addrs []string // bootstrap addresses, host:port
	Kind  string   // KafkaKindFake, KafkaKindExternal or KafkaKindLocal
	// ClientAddrs are the addresses of a second client listener
	// (KafkaClientListener), nil if there is none: clients that bootstrap
	// from them are told them in metadata, so a test can cut those clients
	// off (DropPorts on ClientPorts) while its own keep Addrs.
	ClientAddrs []string

	mu sync.Mutex

	// kfake
	fake     *kfake.Cluster
	fakeOpts []kfake.Opt // to start it again on the same port and data dir

	// scripts/kafka-local
	proc    *kafkaLocalProc
	args    []string // script arguments (run ...)
	dataDir string
	logPath string
	shared  bool // one broker for the whole test process: no Stop/Restart

	restartable bool

	// scripts/kafka-local --secure (KafkaSecured): nil without security
	secure *KafkaSecure

	// scripts/kafka-local start --nodes N (RealKafkaCluster)
	nodes    int
	pidFile  string
	replicas int16 // replication factor of CreateTopic; 0 means 1
}

// KafkaOpt tunes Kafka and RealKafka.
type KafkaOpt func(*kafkaConfig)

type kafkaConfig struct {
	restartable    bool
	clientListener bool
	nodeCgroups    bool
	secure         string   // KafkaSecured: the client-auth mode; "" without security
	oauth          []string // KafkaOAuth: the script's --oauth-* arguments
}

// KafkaNodeCgroups asks (RealKafkaCluster) for every node's JVM to run
// alone in a cgroup v2 of its own (NodeCgroup), so that DropFromCgroup can
// cut one node off the others while clients still reach it.
func KafkaNodeCgroups() KafkaOpt {
	return func(c *kafkaConfig) { c.nodeCgroups = true }
}

// KafkaClientListener asks (with KafkaRestartable, on a real broker) for a
// second client listener, CLIENT on a port of its own, in ClientAddrs: the
// fault suite points the workers at it, so that dropping its packets cuts
// off the workers and not the test's own clients.
func KafkaClientListener() KafkaOpt {
	return func(c *kafkaConfig) { c.clientListener = true }
}

// KafkaRestartable asks for a cluster of the test's own that Stop, Start,
// Restart and Kill work on: a kfake cluster that persists its state in a
// temporary dir, or (RealKafka, or Kafka with KAFKA_BROKERS or
// FLAKESTREAM_KAFKA_LOCAL=1) a broker started by scripts/kafka-local with a
// data dir of its own. An external broker (KAFKA_BROKERS) is never restarted.
func KafkaRestartable() KafkaOpt {
	return func(c *kafkaConfig) { c.restartable = true }
}

// Kafka returns a Kafka cluster for t, stopped at the end of t: KAFKA_BROKERS
// if set, else a real broker if FLAKESTREAM_KAFKA_LOCAL=1, else kfake.
// With KafkaRestartable it is a cluster of t's own (see there).
func Kafka(t testing.TB, opts ...KafkaOpt) *KafkaCluster {
	t.Helper()
	cfg := kafkaApply(opts)
	wantReal := os.Getenv("KAFKA_BROKERS") != "" || kafkaLocalMode() == "1"
	if cfg.restartable {
		if !wantReal {
			return kafkaStartFake(t, true)
		}
		why := kafkaLocalUnavailable()
		if why == "" {
			return kafkaStartOwnLocal(t, cfg)
		}
		t.Logf("testenv: restartable Kafka: %s; using kfake", why)
		return kafkaStartFake(t, true)
	}
	if brokers := kafkaExternalBrokers(); brokers != nil {
		return kafkaExternal(t, brokers)
	}
	if kafkaLocalMode() == "1" {
		if why := kafkaLocalUnavailable(); why != "" {
			t.Fatalf("testenv: FLAKESTREAM_KAFKA_LOCAL=1 but %s", why)
		}
		return kafkaSharedLocal(t)
	}
	return kafkaStartFake(t, false)
}

// RealKafka returns a real Apache Kafka broker: KAFKA_BROKERS if set, else
// one started by scripts/kafka-local (shared by the tests of this process,
// or t's own with KafkaRestartable). Without one it skips t, with a one-line
// reason; under CI=true it fails t instead.
func RealKafka(t testing.TB, opts ...KafkaOpt) *KafkaCluster {
	t.Helper()
	cfg := kafkaApply(opts)
	if cfg.secure != "" && !cfg.restartable {
		cfg.restartable = true // a secured broker is the test's own, never KAFKA_BROKERS
	}
	if !cfg.restartable {
		if brokers := kafkaExternalBrokers(); brokers != nil {
			return kafkaExternal(t, brokers)
		}
	}
	if why := kafkaLocalUnavailable(); why != "" {
		if !cfg.restartable && kafkaLocalMode() != "1" && os.Getenv("KAFKA_BROKERS") == "" {
			why = "no real Kafka: set KAFKA_BROKERS, or FLAKESTREAM_KAFKA_LOCAL=1 (" + why + ")"
		} else {
			why = "no real Kafka: " + why
		}
		if kafkaCI() {
			t.Fatalf("testenv: %s (CI=true)", why)
		}
		t.Skipf("testenv: %s", why)
	}
	if cfg.restartable {
		return kafkaStartOwnLocal(t, cfg)
	}
	return kafkaSharedLocal(t)
}

// Real reports whether the cluster is an Apache Kafka broker (not kfake).
func (c *KafkaCluster) Real() bool { return c.Kind != KafkaKindFake }

// DataDir returns the data directory of a broker started by
// scripts/kafka-local ("" for kfake or an external cluster): its logs,
// __transaction_state segments and kafka-local.out, for evidence after a
// failed run.
func (c *KafkaCluster) DataDir() string { return c.dataDir }

// Fake returns the kfake cluster (for ControlKey fault injection), or nil
// for a real broker. After Restart it is a new *kfake.Cluster.
func (c *KafkaCluster) Fake() *kfake.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fake
}

// Client returns a franz-go client seeded with the cluster's addresses,
// closed at the end of t.
//
// On a secured broker (KafkaSecured) it signs in as the super user.
func (c *KafkaCluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...)}, c.adminOpts(t)...), opts...)...)
	if err != nil {
		t.Fatalf("testenv: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for the cluster, closed at the end of t.
func (c *KafkaCluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// CreateTopic creates topic with the given number of partitions
// (replication factor 1; on a RealKafkaCluster 3, or its node count if
// smaller) and waits until every partition has a leader.
func (c *KafkaCluster) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := c.Admin(t)
	if _, err := adm.CreateTopic(ctx, partitions, max(c.replicas, 1), nil, topic); err != nil {
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("testenv: create topic %q (%d partitions) on %s: %v", topic, partitions, c.Kind, err)
		}
		// Idempotent when the partition count matches (an external broker
		// may keep topics from an earlier run).
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil && int32(len(md.Topics[topic].Partitions)) != partitions {
			t.Fatalf("testenv: topic %q exists with %d partitions, not %d", topic, len(md.Topics[topic].Partitions), partitions)
		}
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && int32(len(td.Partitions)) == partitions {
				ready := true
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
					}
				}
				if ready {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: topic %q has no leaders after 60s (last error: %v)", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewTopic creates a topic with a name unique to t (usable on a shared
// broker) and the given number of partitions, and returns its name.
func (c *KafkaCluster) NewTopic(t testing.TB, partitions int32) string {
	t.Helper()
	name := KafkaTopicName(t)
	c.CreateTopic(t, name, partitions)
	return name
}

// KafkaTopicName returns a topic (or group, or transactional ID) name unique
// to t: its test name, sanitised, and a random suffix.
func KafkaTopicName(t testing.TB) string {
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 180 {
		name = name[:180]
	}
	return name + "-" + kafkaRandomHex(4)
}

// Stop stops the cluster (clean shutdown); Start starts it again on the
// same address with the same data. Only for KafkaRestartable clusters.
func (c *KafkaCluster) Stop(t testing.TB) {
	t.Helper()
	c.lockRestartable(t)
	defer c.mu.Unlock()
	switch c.Kind {
	case KafkaKindFake:
		if c.fake != nil {
			c.fake.Close()
			c.fake = nil
		}
	case KafkaKindLocal:
		c.stopProc(t, syscall.SIGTERM, "stop")
	}
}

// Kill stops the cluster abruptly: the real broker's JVM gets SIGKILL (an
// unclean shutdown, like a crash; data kept). kfake has no crash: it is
// closed as by Stop. Start brings it back.
func (c *KafkaCluster) Kill(t testing.TB) {
	t.Helper()
	if c.Kind != KafkaKindLocal {
		c.Stop(t)
		return
	}
	c.lockRestartable(t)
	defer c.mu.Unlock()
	c.stopProc(t, syscall.SIGUSR1, "kill")
}

// stopProc stops the real broker's process, if it runs, with sig (see
// kafkaProc.stop); verb names the step in the failure. The caller holds
// c.mu.
func (c *KafkaCluster) stopProc(t testing.TB, sig syscall.Signal, verb string) {
	t.Helper()
	if c.proc == nil {
		return
	}
	if err := c.proc.stop(sig); err != nil {
		t.Fatalf("testenv: %s kafka: %v\n%s", verb, err, kafkaTail(c.logPath))
	}
	c.proc = nil
}

// Start starts a stopped cluster again on the same address and data.
func (c *KafkaCluster) Start(t testing.TB) {
	t.Helper()
	c.lockRestartable(t)
	defer c.mu.Unlock()
	switch c.Kind {
	case KafkaKindFake:
		c.startFake(t)
	case KafkaKindLocal:
		if c.proc != nil {
			return
		}
		proc, addr, err := kafkaRunScript(c.args, c.dataDir, c.logPath)
		if err != nil {
			t.Fatalf("testenv: restart kafka: %v", err)
		}
		c.proc = proc
		if addr != c.Addrs[0] {
			t.Fatalf("testenv: kafka came back at %s, not %s", addr, c.Addrs[0])
		}
	}
}

// startFake starts the stopped kfake cluster again on its address. The
// caller holds c.mu.
func (c *KafkaCluster) startFake(t testing.TB) {
	t.Helper()
	if c.fake != nil {
		return
	}
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.fake, err = kfake.NewCluster(c.fakeOpts...)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port may linger a moment
	}
	if err != nil {
		t.Fatalf("testenv: restart kfake: %v", err)
	}
}

// Restart is Stop then Start: the cluster comes back on the same address
// with its topics, committed offsets and transactions.
func (c *KafkaCluster) Restart(t testing.TB) {
	t.Helper()
	c.Stop(t)
	c.Start(t)
}

// lockRestartable locks c.mu for Stop, Kill or Start, which the caller
// unlocks, after failing the test if c was not asked for as restartable.
func (c *KafkaCluster) lockRestartable(t testing.TB) {
	t.Helper()
	if !c.restartable {
		t.Fatalf("testenv: this %s Kafka cannot be stopped or restarted; ask Kafka/RealKafka for KafkaRestartable()", c.Kind)
	}
	c.mu.Lock()
}

// ------------------------------------------------------------------ kinds

func kafkaApply(opts []KafkaOpt) kafkaConfig {
	var cfg kafkaConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func kafkaExternalBrokers() []string {
	var out []string
	for _, a := range strings.Split(os.Getenv("KAFKA_BROKERS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func kafkaExternal(t testing.TB, brokers []string) *KafkaCluster {
	t.Helper()
	return &KafkaCluster{Addrs: brokers, Kind: KafkaKindExternal}
}

func kafkaStartFake(t testing.TB, restartable bool) *KafkaCluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1)}
	if restartable {
		opts = append(opts, kfake.DataDir(t.TempDir()))
	}
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("testenv: kfake: %v", err)
	}
	addrs := fake.ListenAddrs()
	c := &KafkaCluster{Addrs: addrs, Kind: KafkaKindFake, fake: fake, restartable: restartable}
	if restartable {
		_, portStr, _ := strings.Cut(addrs[0], ":")
		port, _ := strconv.Atoi(portStr)
		c.fakeOpts = append(opts, kfake.Ports(port))
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.fake != nil {
			c.fake.Close()
			c.fake = nil
		}
	})
	return c
}

// kafkaStartLocal starts one scripts/kafka-local broker on data directory
// dir, with flags (after --data-dir), stopped by the script after timeout
// or within a second or two of this process's end.
func kafkaStartLocal(t testing.TB, dir, timeout string, flags ...string) *KafkaCluster {
	t.Helper()
	args := append([]string{"run", "--data-dir", dir}, flags...)
	args = append(args, "--timeout", timeout, "--watch-pid", strconv.Itoa(os.Getpid()))
	logPath := filepath.Join(dir, "kafka-local.out")
	proc, addr, err := kafkaRunScript(args, dir, logPath)
	if err != nil {
		t.Fatalf("testenv: start kafka: %v", err)
	}
	return &KafkaCluster{Addrs: []string{addr}, Kind: KafkaKindLocal, proc: proc, args: args, dataDir: dir, logPath: logPath}
}

// kafkaShared is the one scripts/kafka-local broker of this test process
// (Kafka with FLAKESTREAM_KAFKA_LOCAL=1, and RealKafka). It is not stopped
// by a test's cleanup: the script watches this process's pid and stops the
// broker, removing its data, within a second or two of the process's end.
var kafkaShared struct {
	mu sync.Mutex
	c  *KafkaCluster
}

func kafkaSharedLocal(t testing.TB) *KafkaCluster {
	t.Helper()
	kafkaShared.mu.Lock()
	defer kafkaShared.mu.Unlock()
	if c := kafkaShared.c; c != nil {
		select {
		case <-c.proc.done:
			t.Logf("testenv: the shared kafka-local broker had ended; starting another\n%s", kafkaTail(c.logPath))
		default:
			return c
		}
	}
	dir, err := os.MkdirTemp("", "flakestream-kafka-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// --ephemeral: the script removes dir (data, log, address file) at stop.
	c := kafkaStartLocal(t, dir, kafkaProcessTimeout(), "--ephemeral")
	c.shared = true
	kafkaShared.c = c
	t.Logf("testenv: started shared Apache Kafka at %s (log %s)", c.Addrs[0], c.logPath)
	return c
}

func kafkaStartOwnLocal(t testing.TB, cfg kafkaConfig) *KafkaCluster {
	t.Helper()
	dir := t.TempDir() // removed after the cleanup below has stopped the broker
	var flags []string
	clientAddr := ""
	if cfg.clientListener {
		port := FreePort(t)
		flags = append(flags, "--client-port", strconv.Itoa(port))
		clientAddr = "127.0.0.1:" + strconv.Itoa(port)
	}
	flags = append(flags, cfg.secureArgs()...)
	c := kafkaStartLocal(t, dir, kafkaTestTimeout(t), flags...)
	c.restartable = true
	if clientAddr != "" {
		c.ClientAddrs = []string{clientAddr}
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.proc != nil {
			if err := c.proc.stop(syscall.SIGTERM); err != nil {
				t.Errorf("testenv: stop kafka: %v\n%s", err, kafkaTail(c.logPath))
			}
			c.proc = nil
		}
	})
	if cfg.secure != "" {
		s, err := readKafkaSecure(dir)
		if err != nil {
			t.Fatalf("testenv: secured kafka: %v", err)
		}
		c.secure = s
	}
	return c
}

// ------------------------------------------------------ scripts/kafka-local

func kafkaLocalMode() string { return strings.TrimSpace(os.Getenv("FLAKESTREAM_KAFKA_LOCAL")) }

func kafkaCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "true", "1", "yes":
		return true
	}
	return false
}

var kafkaScriptOnce struct {
	sync.Once
	path string
	err  error
}

// kafkaScript finds scripts/kafka-local from this source file, or else from
// the working directory upwards.
func kafkaScript() (string, error) {
	kafkaScriptOnce.Do(func() {
		var tries []string
		if _, file, _, ok := runtime.Caller(0); ok {
			tries = append(tries, filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka-local"))
		}
		if wd, err := os.Getwd(); err == nil {
			for d := wd; ; d = filepath.Dir(d) {
				tries = append(tries, filepath.Join(d, "scripts", "kafka-local"))
				if filepath.Dir(d) == d {
					break
				}
			}
		}
		for _, p := range tries {
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				kafkaScriptOnce.path = filepath.Clean(p)
				return
			}
		}
		kafkaScriptOnce.err = errors.New("scripts/kafka-local not found")
	})
	return kafkaScriptOnce.path, kafkaScriptOnce.err
}

// kafkaLocalUnavailable says why scripts/kafka-local cannot start a broker
// here, or "" if it can.
func kafkaLocalUnavailable() string {
	if kafkaLocalMode() == "0" {
		return "FLAKESTREAM_KAFKA_LOCAL=0"
	}
	if _, err := kafkaScript(); err != nil {
		return err.Error()
	}
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	if _, err := exec.LookPath(java); err != nil {
		return "java (17+) not found"
	}
	if kafkaLocalMode() == "1" {
		return "" // the script fetches the jars with Maven if need be
	}
	script, _ := kafkaScript()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, script, "cached").Run(); err != nil {
		return "Kafka jars not cached (run scripts/kafka-local fetch, or set FLAKESTREAM_KAFKA_LOCAL=1)"
	}
	return ""
}

// kafkaProcessTimeout bounds a shared broker: the test binary's -test.timeout
// plus a margin (it also stops when this process ends).
func kafkaProcessTimeout() string {
	d := 60 * time.Minute
	if f := flag.Lookup("test.timeout"); f != nil {
		if v, err := time.ParseDuration(f.Value.String()); err == nil && v > 0 {
			d = v + 2*time.Minute
		}
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// kafkaTestTimeout bounds a test's own broker by the test's deadline.
func kafkaTestTimeout(t testing.TB) string {
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if when, ok := dl.Deadline(); ok {
			d := time.Until(when) + 2*time.Minute
			return fmt.Sprintf("%ds", max(int(d.Seconds()), 300))
		}
	}
	return kafkaProcessTimeout()
}

type kafkaLocalProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the script has exited
	err  error         // its exit status, once done
}

// kafkaRunScript runs scripts/kafka-local with args (a "run" command whose
// --data-dir is dir) and waits for its address. The script's stdout and
// stderr go to logPath, a file, not a pipe: the script must be able to
// report its cleanup after this process has gone.
func kafkaRunScript(args []string, dir, logPath string) (*kafkaLocalProc, string, error) {
	script, err := kafkaScript()
	if err != nil {
		return nil, "", err
	}
	addrFile := filepath.Join(dir, "kafka-local.addr")
	_ = os.Remove(addrFile)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", err
	}
	defer logf.Close()
	cmd := exec.Command(script, append(append([]string(nil), args...), "--addr-file", addrFile)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", script, err)
	}
	p := &kafkaLocalProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	// A cold cache means a Maven download first (the script bounds it too).
	deadline := time.After(20 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return p, strings.TrimSpace(string(b)), nil
		}
		select {
		case <-p.done:
			return nil, "", fmt.Errorf("scripts/kafka-local exited (%v) before the broker was ready:\n%s", p.err, kafkaTail(logPath))
		case <-deadline:
			_ = p.stop(syscall.SIGTERM)
			return nil, "", fmt.Errorf("scripts/kafka-local: no broker after 20m:\n%s", kafkaTail(logPath))
		case <-tick.C:
		}
	}
}

// stop signals the script (SIGTERM: clean stop; SIGUSR1: SIGKILL the JVM)
// and waits for it to finish its cleanup.
func (p *kafkaLocalProc) stop(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("scripts/kafka-local: %w", p.err)
		}
		return nil
	case <-time.After(90 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("scripts/kafka-local did not stop in 90s; killed it (the JVM is bounded by --timeout)")
	}
}

func kafkaTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func kafkaRandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// BrokerPID returns the pid of the broker's JVM (a broker started here by
// scripts/kafka-local with KafkaRestartable), for pausing it with SIGSTOP.
// It fails t when there is none.
func (c *KafkaCluster) BrokerPID(t testing.TB) int {
	t.Helper()
	if c.Kind != KafkaKindLocal || !c.restartable {
		t.Fatalf("testenv: BrokerPID needs a %s broker of the test's own (KafkaRestartable), not %s", KafkaKindLocal, c.Kind)
	}
	pid := jvmPID(filepath.Join(c.dataDir, "server.properties"))
	if pid == 0 {
		t.Fatalf("testenv: no JVM runs %s/server.properties", c.dataDir)
	}
	return pid
}

// jvmPID returns the pid of the java process whose command line ends with
// the broker configuration props, 0 if none.
func jvmPID(props string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "java" && args[len(args)-1] == props && args[len(args)-2] == "kafka.Kafka" {
			return pid
		}
	}
	return 0
}
