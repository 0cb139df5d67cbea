package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A bad --redis URL, a wrong master name and a cluster seed that is not a
// cluster node: each one line on stderr, no password, no retrying for 30s.
func TestGenBadRedisIsOneLine(t *testing.T) {
	single := testenv.RedisServer(t)
	s := testenv.NewRedisSentinels(t)
	wrongMaster := strings.TrimSuffix(s.URL, s.Master) + "nosuchmaster"
	for _, c := range []struct {
		url, want string
		code      int
	}{
		{"redis+cluster://:secret@127.0.0.1", `flakestream: idgen: bad redis url redis+cluster://:xxxxx@127.0.0.1: host "127.0.0.1": want host:port`, 2},
		{"redis+sentinel://:secret@127.0.0.1:26379", "flakestream: idgen: bad redis url redis+sentinel://:xxxxx@127.0.0.1:26379: want the master name as the path: redis+sentinel://s1:26379,s2:26379/MASTER", 2},
		{"memcached://127.0.0.1:11211", `flakestream: idgen: bad redis url memcached://127.0.0.1:11211: scheme "memcached"`, 2},
		{"redis+cluster://" + single.Addr, "redis+cluster:// names a server that is not a Redis Cluster node", 1},
		{wrongMaster, `know no master named "nosuchmaster"`, 1},
	} {
		t.Run(c.url, func(t *testing.T) {
			_, errOut, code := runApp(t, "", nil, "gen", "--redis", c.url)
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "secret") {
				t.Fatalf("exit %d, stderr %q; want %d and one line with %q", code, errOut, c.code, c.want)
			}
			// gen prints a line for every retry: a configuration error
			// has none.
			if strings.Contains(errOut, "retrying") {
				t.Fatalf("stderr %q: a configuration error must not be retried", errOut)
			}
		})
	}
}

// run numbers through a Redis that speaks only TLS, requires a client
// certificate and whose certificate names neither 127.0.0.1 nor localhost,
// signed in as an ACL user with only docs/redis.md's numbering rule, given
// only the flags a user would pass: every order is numbered and Redis
// denies the worker nothing (its ACL LOG stays empty). The same flags with
// a redis:// URL are one line and exit code 2.
func TestRunOverRedisTLSWithACLUser(t *testing.T) {
	r := testenv.RedisServerTLS(t)
	admin := r.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "worker", "reset", "on", ">w0rker-pass", "-@all", "+evalsha", "+eval", "+hmget", "+hset", "+time", "~{flakestream}:*"},
		{"ACL", "LOG", "RESET"},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "orders.numbered", "orders.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recs := orders.Records("orders", 2, 50, orders.Mix{}, 100, 0)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tlsFlags := []string{"--redis-tls-ca", r.TLS.CA.File, "--redis-tls-cert", r.TLS.ClientCert, "--redis-tls-key", r.TLS.ClientKey,
		"--redis-tls-server-name", testenv.RedisTLSServerName}

	t.Setenv("FLAKESTREAM_REDIS", "rediss://worker:w0rker-pass@"+r.Addr+"/0")
	w := startApp(t, append([]string{"run", "--brokers", c.ListenAddrs()[0], "--input-topic", "orders", "--output-topic", "orders.numbered",
		"--server-id", "1", "--worker-id", "1", "--http-addr", ""}, tlsFlags...)...)
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("orders.numbered"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < len(recs); {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d numbered orders; worker log:\n%s", got, len(recs), harness.Tail(w.stderr.String(), 2000))
		}
		got += fs.NumRecords()
	}
	if code, err := w.stop(20 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, harness.Tail(w.stderr.String(), 2000))
	}
	if log, err := admin.Do(ctx, "ACL", "LOG").Slice(); err != nil || len(log) != 0 {
		t.Errorf("Redis denied the worker: %v %v", log, err)
	}

	plain := "redis://worker:w0rker-pass@" + r.Addr + "/0"
	_, errOut, code := runApp(t, "", nil, append([]string{"gen", "--redis", plain}, tlsFlags...)...)
	if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "--redis-tls-ca") || !strings.Contains(errOut, "rediss://") || strings.Contains(errOut, "w0rker-pass") {
		t.Errorf("TLS flags with a redis:// URL: exit %d, %q; want one line naming the flags and rediss://, exit 2, no password", code, errOut)
	}
}
