package testenv

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// RedisPair is a primary and one replica whose replication link runs
// through a proxy the test controls, so that it can cut replication at an
// exact point: after Cut, nothing more the primary writes reaches the
// replica, yet the primary still counts it as a connected replica (as
// with a network partition, until repl-timeout).
type RedisPair struct {
	Primary, Replica *RedisProc
	link             *linkProxy
}

// NewRedisPair starts the two servers from redis-server on PATH, links
// them through the proxy, and returns once the replica's link is up.
func NewRedisPair(t testing.TB) *RedisPair {
	t.Helper()
	bins := redisBins(t, "redis-server")
	p := &RedisPair{}
	p.Primary = newRedisProc(t, bins[0], FreePort(t))
	p.Primary.start(t)
	p.link = newLinkProxy(t, p.Primary.Addr)
	_, port, _ := net.SplitHostPort(p.link.addr)
	p.Replica = newRedisProc(t, bins[0], FreePort(t), "--replicaof", "127.0.0.1", port)
	p.Replica.start(t)
	c := p.Replica.Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: replica link not up within 20s: %v %s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cut drops, from now on, every byte between primary and replica, while
// both connections stay open.
func (p *RedisPair) Cut() { p.link.cut.Store(true) }

// Promote makes the replica a primary, as a failover would after the
// primary died: the link is closed first, so nothing cut reaches it.
func (p *RedisPair) Promote(t testing.TB) {
	t.Helper()
	p.link.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := p.Replica.Client(t)
	if err := c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("testenv: promote replica: %v", err)
	}
}

type linkProxy struct {
	addr  string
	l     net.Listener
	cut   atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newLinkProxy(t testing.TB, target string) *linkProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{addr: l.Addr().String(), l: l}
	t.Cleanup(p.close)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, time.Second)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	return p
}

// pipe copies src to dst until either closes, dropping what it reads
// once the link is cut.
func (p *linkProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *linkProxy) close() {
	p.cut.Store(true)
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
