package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisProc is one redis-server or redis-sentinel process of a test.
type RedisProc struct {
	Addr string // 127.0.0.1:port
	Port int
	dir  string
	args []string
	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	// tls is the client configuration of a TLS-only process; nil for
	// plain TCP.
	tls *tls.Config
}

// options are o for a client of this process: its address, and its TLS.
func (p *RedisProc) options(o *redis.Options) *redis.Options {
	o.Addr, o.TLSConfig = p.Addr, p.tls
	return o
}

// Kill ends the process with SIGKILL, the way a host dies: no flush, no
// goodbye to its replicas or sentinels.
func (p *RedisProc) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Alive reports whether the process runs.
func (p *RedisProc) Alive() bool { return p.cmd != nil }

// Client returns a client of this one process, closed when the test ends.
func (p *RedisProc) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(p.options(&redis.Options{MaxRetries: -1}))
	t.Cleanup(func() { c.Close() })
	return c
}

func (p *RedisProc) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.dir
	// Dies with the test binary, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", p.bin, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	c := redis.NewClient(p.options(&redis.Options{MaxRetries: -1, DialTimeout: 200 * time.Millisecond}))
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
			t.Fatalf("testenv: %s on %s did not answer within 10s: %v\n%s", filepath.Base(p.bin), p.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *RedisProc) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// clusterPort returns a port p on 127.0.0.1 below 55536 with p and p+10000
// (the cluster bus port) free a moment ago.
func clusterPort(t testing.TB, taken map[int]bool) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(35000)
		if taken[p] || taken[p+10000] {
			continue
		}
		ok := true
		for _, q := range []int{p, p + 10000} {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			taken[p], taken[p+10000] = true, true
			return p
		}
	}
	t.Fatal("testenv: no free port pair below 55536 for a cluster node")
	return 0
}

func redisBins(t testing.TB, names ...string) []string {
	t.Helper()
	var bins []string
	for _, n := range names {
		b, err := exec.LookPath(n)
		if err != nil {
			Missing(t, fmt.Sprintf("no %s on PATH (apt-get install redis-server redis-sentinel redis-tools)", n))
		}
		bins = append(bins, b)
	}
	return bins
}

func newRedisProc(t testing.TB, bin string, port int, args ...string) *RedisProc {
	dir := t.TempDir()
	p := &RedisProc{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, dir: dir, bin: bin}
	p.args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--daemonize", "no", "--logfile", filepath.Join(dir, "log"), "--save", "", "--appendonly", "no")
	return p
}

// RedisCluster is a Redis Cluster of 3 masters and 3 replicas for a test.
type RedisCluster struct {
	URL   string // redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...
	Nodes []*RedisProc
	// TLS is set for NewRedisClusterTLS: what its clients need.
	TLS *RedisTLS
}

// NewRedisCluster starts a Redis Cluster of 3 masters with one replica
// each, from redis-server and redis-cli on PATH, on 127.0.0.1, and returns
// once every slot is served and every replica's link to its master is up
// (a replica whose link is down would not be promoted). Node timeout is 1s,
// so a killed master is failed over in a few seconds. Everything stops
// when the test ends. Without the binaries it skips (fails under CI=true).
func NewRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	return newRedisCluster(t, nil)
}

// NewRedisClusterTLS is NewRedisCluster with every node speaking only TLS
// (RedisServerTLS's settings), the cluster bus and replication included;
// the URL is rediss+cluster://.
func NewRedisClusterTLS(t testing.TB) *RedisCluster {
	t.Helper()
	return newRedisCluster(t, newRedisTLS(t))
}

func newRedisCluster(t testing.TB, rt *RedisTLS) *RedisCluster {
	t.Helper()
	bins := redisBins(t, "redis-server", "redis-cli")
	taken := map[int]bool{}
	c := &RedisCluster{TLS: rt}
	var addrs []string
	for range 6 {
		p := newRedisProc(t, bins[0], clusterPort(t, taken), "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000")
		if rt != nil {
			p.args, p.tls = append(p.args, append(rt.serverArgs(p.Port), "--tls-cluster", "yes")...), rt.Config(t)
		}
		p.start(t)
		c.Nodes = append(c.Nodes, p)
		addrs = append(addrs, p.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")
	if rt != nil {
		args = append(args, "--tls", "--cacert", rt.CA.File, "--cert", rt.ClientCert, "--key", rt.ClientKey, "--sni", rt.ServerName)
	}
	create := exec.CommandContext(ctx, bins[1], args...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.URL = "redis+cluster://" + strings.Join(addrs, ",")
	if rt != nil {
		c.URL = "rediss+cluster://" + strings.Join(addrs, ",")
	}
	c.WaitHealthy(t, 30*time.Second)
	return c
}

// WaitHealthy waits until every live node reports cluster_state:ok and
// every live replica master_link_status:up.
func (c *RedisCluster) WaitHealthy(t testing.TB, d time.Duration) {
	t.Helper()
	waitHealthy(t, d, "redis cluster", c.health)
}

// health says what is not healthy yet in the cluster; "" when all is.
func (c *RedisCluster) health() string {
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		cl := redis.NewClient(n.options(&redis.Options{MaxRetries: -1}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ci, err1 := cl.ClusterInfo(ctx).Result()
		ri, err2 := cl.Info(ctx, "replication").Result()
		cancel()
		cl.Close()
		switch {
		case err1 != nil || err2 != nil:
			return fmt.Sprintf("%s: %v %v", n.Addr, err1, err2)
		case !strings.Contains(ci, "cluster_state:ok"):
			return n.Addr + ": cluster_state not ok"
		case strings.Contains(ri, "role:slave") && !strings.Contains(ri, "master_link_status:up"):
			return n.Addr + ": replica link not up"
		}
	}
	return ""
}

// waitHealthy polls health every 100ms until it returns "" and fails the
// test with its last answer when d passes first.
func waitHealthy(t testing.TB, d time.Duration, what string, health func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		why := health()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not healthy within %s: %s", what, d, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MasterOf returns the node that is master of key's slot now, asked of
// the live nodes themselves.
func (c *RedisCluster) MasterOf(t testing.TB, key string) *RedisProc {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		cl := redis.NewClient(n.options(&redis.Options{MaxRetries: -1}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = cl.ClusterShards(ctx).Result()
		}
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		for _, s := range shards {
			for _, r := range s.Slots {
				if r.Start > slot || slot > r.End {
					continue
				}
				for _, sn := range s.Nodes {
					if sn.Role != "master" || sn.Health != "online" {
						continue
					}
					for _, m := range c.Nodes {
						if m.Port == int(sn.Port) {
							return m
						}
					}
				}
			}
		}
	}
	t.Fatalf("testenv: no live node knows the master of %q", key)
	return nil
}

// RedisSentinels is a Redis primary with 2 replicas, watched by 3
// sentinels, for a test.
type RedisSentinels struct {
	URL       string // redis+sentinel://s1,s2,s3/MASTER
	Master    string // the master name, "flakestream"
	Servers   []*RedisProc
	Sentinels []*RedisProc
	// TLS is set for NewRedisSentinelsTLS: what its clients need.
	TLS *RedisTLS
}

// NewRedisSentinels starts a primary, 2 replicas and 3 sentinels (quorum
// 2, down-after 1s) from redis-server and redis-sentinel on PATH, on
// 127.0.0.1, and returns once both replicas' links are up and every
// sentinel sees both replicas and the other sentinels. Everything stops
// when the test ends.
func NewRedisSentinels(t testing.TB) *RedisSentinels {
	t.Helper()
	return newRedisSentinels(t, nil)
}

// NewRedisSentinelsTLS is NewRedisSentinels with every server and sentinel
// speaking only TLS (RedisServerTLS's settings, in TLS), replication and
// the sentinels' links included; the URL is rediss+sentinel://.
func NewRedisSentinelsTLS(t testing.TB) *RedisSentinels {
	t.Helper()
	return newRedisSentinels(t, newRedisTLS(t))
}

func newRedisSentinels(t testing.TB, rt *RedisTLS) *RedisSentinels {
	t.Helper()
	bins := redisBins(t, "redis-server", "redis-sentinel")
	s := &RedisSentinels{Master: "flakestream", TLS: rt}
	var clientTLS *tls.Config
	if rt != nil {
		clientTLS = rt.Config(t)
	}
	for i := range 3 {
		var args []string
		if i > 0 {
			args = []string{"--replicaof", "127.0.0.1", strconv.Itoa(s.Servers[0].Port)}
		}
		p := newRedisProc(t, bins[0], FreePort(t), args...)
		if rt != nil {
			p.args, p.tls = append(p.args, rt.serverArgs(p.Port)...), clientTLS
		}
		p.start(t)
		s.Servers = append(s.Servers, p)
	}
	var addrs []string
	for range 3 {
		port := FreePort(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[4]s 1000\nsentinel failover-timeout %[4]s 10000\nsentinel parallel-syncs %[4]s 2\n",
			port, dir, filepath.Join(dir, "log"), s.Master, s.Servers[0].Port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &RedisProc{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, dir: dir, bin: bins[1], args: []string{conf}}
		if rt != nil {
			p.args, p.tls = append(p.args, rt.serverArgs(port)...), clientTLS
		}
		p.start(t)
		s.Sentinels = append(s.Sentinels, p)
		addrs = append(addrs, p.Addr)
	}
	s.URL = "redis+sentinel://" + strings.Join(addrs, ",") + "/" + s.Master
	if rt != nil {
		s.URL = "rediss+sentinel://" + strings.Join(addrs, ",") + "/" + s.Master
	}
	s.WaitHealthy(t, 30*time.Second)
	return s
}

// WaitHealthy waits until every live sentinel names a live primary with
// every other live server as a replica whose link is up, and knows the
// other live sentinels.
func (s *RedisSentinels) WaitHealthy(t testing.TB, d time.Duration) {
	t.Helper()
	waitHealthy(t, d, "sentinel setup", s.health)
}

func (s *RedisSentinels) health() string {
	live, sentinels := 0, 0
	for _, p := range s.Servers {
		if p.Alive() {
			live++
		}
	}
	for _, p := range s.Sentinels {
		if p.Alive() {
			sentinels++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range s.Sentinels {
		if !p.Alive() {
			continue
		}
		sc := redis.NewSentinelClient(p.options(&redis.Options{MaxRetries: -1}))
		m, err := sc.Master(ctx, s.Master).Result()
		sc.Close()
		if err != nil {
			return fmt.Sprintf("sentinel %s: %v", p.Addr, err)
		}
		if m["flags"] != "master" {
			return fmt.Sprintf("sentinel %s: master flags %q", p.Addr, m["flags"])
		}
		if m["num-slaves"] != strconv.Itoa(live-1) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
			return fmt.Sprintf("sentinel %s: %s replicas, %s other sentinels", p.Addr, m["num-slaves"], m["num-other-sentinels"])
		}
	}
	primary := s.Primary()
	if primary == nil {
		return "no live primary"
	}
	for _, p := range s.Servers {
		if !p.Alive() || p == primary {
			continue
		}
		c := redis.NewClient(p.options(&redis.Options{MaxRetries: -1}))
		ri, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil || !strings.Contains(ri, "master_link_status:up") || !strings.Contains(ri, fmt.Sprintf("master_port:%d", primary.Port)) {
			return fmt.Sprintf("replica %s: link to %s not up (%v)", p.Addr, primary.Addr, err)
		}
	}
	return ""
}

// Primary returns the live server that reports role:master, or nil.
func (s *RedisSentinels) Primary() *RedisProc {
	for _, p := range s.Servers {
		if !p.Alive() {
			continue
		}
		c := redis.NewClient(p.options(&redis.Options{MaxRetries: -1}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ri, err := c.Info(ctx, "replication").Result()
		cancel()
		c.Close()
		if err == nil && strings.Contains(ri, "role:master") {
			return p
		}
	}
	return nil
}
