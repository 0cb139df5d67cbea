// Package testenv finds the services that tests run against: a real Redis
// and a Kafka broker. A test asks for a service; testenv takes the one named
// in the environment, else starts one from a binary on PATH, else a
// container where a Docker engine answers, else skips the test with a
// one-line reason. Under CI=true a missing service fails the test instead,
// so that CI can never pass by skipping.
package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
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
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Redis is a Redis server for a test.
type Redis struct {
	URL  string // redis://127.0.0.1:port/0
	Addr string // 127.0.0.1:port
	Kind string // "external" (REDIS_URL), "local" (redis-server on PATH) or "container"

	// TLS is set for a server from RedisServerTLS: what its clients need.
	TLS *RedisTLS

	dir  string
	port int
	cmd  *exec.Cmd
}

// RedisTLS is what a client of a TLS-only Redis (RedisServerTLS) needs.
type RedisTLS struct {
	CA *TestCA
	// ServerName is the one name in the server's certificate: not the
	// address a client dials, so a client must be told it.
	ServerName string
	// ClientCert and ClientKey are the PEM files of a client certificate
	// the CA signed; the server requires one.
	ClientCert, ClientKey string
	serverCert, serverKey string
}

// Config is a TLS client configuration for the server: the CA, the server
// name and the client certificate.
func (r *RedisTLS) Config(t testing.TB) *tls.Config {
	t.Helper()
	return r.CA.ClientConfig(t, r.ServerName, r.ClientCert, r.ClientKey)
}

// RedisTLSServerName is the name in the certificate of RedisServerTLS.
const RedisTLSServerName = "redis.flakestream.test"

// Missing skips the test with reason, or fails it under CI=true, where every
// service must be there.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", reason)
	}
	t.Skip(reason)
}

// RedisServer returns a Redis for the test: REDIS_URL if set, else a
// redis-server from PATH on a free port (stopped when the test ends), else a
// testcontainers Redis, else it skips.
func RedisServer(t testing.TB) *Redis {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("REDIS_URL: %v", err)
		}
		return &Redis{URL: u, Addr: opts.Addr, Kind: "external"}
	}
	if bin, err := exec.LookPath("redis-server"); err == nil {
		r := &Redis{Kind: "local", dir: t.TempDir(), port: FreePort(t)}
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
		r.URL = "redis://" + r.Addr + "/0"
		r.start(t, bin)
		t.Cleanup(func() { r.stop() })
		return r
	}
	if err := DockerAvailable(); err == nil {
		return redisContainer(t)
	}
	Missing(t, "no Redis: set REDIS_URL, put redis-server on PATH (apt-get install redis-server), or run a Docker engine")
	return nil
}

// RedisServerTLS returns a redis-server from PATH on a free port of
// 127.0.0.1 that speaks only TLS (no plain port) and requires a client
// certificate; its own certificate names RedisTLSServerName only, not the
// address. Its URL is rediss://127.0.0.1:port/0. Without redis-server on
// PATH it skips (fails under CI=true): REDIS_URL and containers are not
// used for it.
func RedisServerTLS(t testing.TB) *Redis {
	t.Helper()
	bin := redisBins(t, "redis-server")[0]
	r := &Redis{Kind: "local", dir: t.TempDir(), port: FreePort(t), TLS: newRedisTLS(t)}
	r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	r.URL = "rediss://" + r.Addr + "/0"
	r.start(t, bin)
	t.Cleanup(func() { r.stop() })
	return r
}

// newRedisTLS makes a CA, a server certificate that names only
// RedisTLSServerName and a client certificate.
func newRedisTLS(t testing.TB) *RedisTLS {
	t.Helper()
	ca := NewTestCA(t)
	rt := &RedisTLS{CA: ca, ServerName: RedisTLSServerName}
	rt.serverCert, rt.serverKey = ca.Issue(t, "redis-server", RedisTLSServerName)
	rt.ClientCert, rt.ClientKey = ca.Issue(t, "redis-client")
	return rt
}

// serverArgs are the arguments that make a redis-server or redis-sentinel
// listen on port with TLS only, require client certificates and use TLS
// to its primary and to the other sentinels.
func (r *RedisTLS) serverArgs(port int) []string {
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", r.serverCert, "--tls-key-file", r.serverKey,
		"--tls-ca-cert-file", r.CA.File, "--tls-auth-clients", "yes", "--tls-replication", "yes"}
}

// CanRestart reports whether the test controls the server's process, so
// that Stop and Start work.
func (r *Redis) CanRestart() bool { return r.Kind == "local" }

// Stop shuts the server down (an outage). It keeps its data: the server
// writes an append-only file, as production Redis should.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	if !r.CanRestart() {
		t.Fatalf("testenv: cannot stop a %s Redis", r.Kind)
	}
	r.stop()
}

// Start starts a stopped server again on the same port and data.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	if !r.CanRestart() {
		t.Fatalf("testenv: cannot start a %s Redis", r.Kind)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	r.start(t, bin)
}

// Client returns a client closed when the test ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r.TLS != nil {
		opts.TLSConfig = r.TLS.Config(t)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func (r *Redis) start(t testing.TB, bin string) {
	t.Helper()
	args := []string{"--port", strconv.Itoa(r.port)}
	var tlsCfg *tls.Config
	if r.TLS != nil {
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(r.port),
			"--tls-cert-file", r.TLS.serverCert, "--tls-key-file", r.TLS.serverKey,
			"--tls-ca-cert-file", r.TLS.CA.File, "--tls-auth-clients", "yes"}
		tlsCfg = r.TLS.Config(t)
	}
	cmd := exec.Command(bin, append(args, "--bind", "127.0.0.1",
		"--dir", r.dir, "--save", "", "--appendonly", "yes",
		"--daemonize", "no", "--logfile", filepath.Join(r.dir, "redis.log"))...)
	// The server dies with the test binary, even a killed one, so no test
	// leaves a Redis running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	r.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr, 200*time.Millisecond)
		if err == nil && tlsCfg != nil {
			tc := tls.Client(c, tlsCfg)
			_ = tc.SetDeadline(time.Now().Add(time.Second))
			if err = tc.Handshake(); err != nil {
				tc.Close()
			}
			c = tc
		}
		if err == nil {
			_, err = c.Write([]byte("PING\r\n"))
			if err == nil {
				var line string
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				line, err = bufio.NewReader(c).ReadString('\n')
				if err == nil && !strings.HasPrefix(line, "+PONG") {
					err = fmt.Errorf("reply %q", line)
				}
			}
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			r.stop()
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			t.Fatalf("testenv: redis-server on %s did not answer within 10s: %v\n%s", r.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *Redis) stop() {
	if r.cmd == nil {
		return
	}
	// SIGTERM lets Redis flush its append-only file, like a clean restart.
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

func redisContainer(t testing.TB) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        "redis:7",
			ExposedPorts: []string{"6379/tcp"},
			WaitingFor:   wait.ForListeningPort("6379/tcp"),
		},
		Started: true,
	})
	if err != nil {
		Missing(t, fmt.Sprintf("testcontainers redis: %v", err))
	}
	t.Cleanup(func() { _ = testcontainers.TerminateContainer(c) })
	ep, err := c.PortEndpoint(ctx, "6379/tcp", "")
	if err != nil {
		t.Fatalf("testcontainers redis endpoint: %v", err)
	}
	return &Redis{URL: "redis://" + ep + "/0", Addr: ep, Kind: "container"}
}

// DockerAvailable reports why no Docker engine answers, or nil when one does.
func DockerAvailable() (err error) {
	defer func() {
		// testcontainers panics on some broken Docker setups; that too
		// means "no engine here".
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return p.Health(ctx)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PID returns the pid of a local redis-server (CanRestart), for pausing it
// with SIGSTOP; it fails t for any other kind.
func (r *Redis) PID(t testing.TB) int {
	t.Helper()
	if !r.CanRestart() || r.cmd == nil {
		t.Fatalf("testenv: no redis-server process of this test's (a %s Redis)", r.Kind)
	}
	return r.cmd.Process.Pid
}
