package idgen

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
	"github.com/redis/go-redis/v9"
)

// denied reports whether err is Redis refusing a command to the user: NOPERM
// for a command the client sends, or the error of a command a script calls.
func denied(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't run this command"))
}

// The ACL rules docs/redis.md gives a worker's Redis user with the default
// --redis-prefix: for numbering, and what idempotency keys and WAIT add.
const (
	aclSequencer = "-@all +evalsha +eval +hmget +hset +time ~{flakestream}:*"
	aclKeys      = "+set ~flakestream:key:*"
	aclIndex     = "+get ~flakestream:num:*"
	aclWait      = "+info +wait"
)

// Each rule is exactly what its part of the worker needs, on a real
// redis-server that speaks only TLS and requires a client certificate
// (which the client gets through NewRedisClientTLS, with a server name that
// is not the address): with the rule, the part works and Redis logs no
// denied command (ACL LOG); without any one of the rule's permissions it
// fails with NOPERM. The script cache is flushed before each try, so EVAL,
// which runs only when EVALSHA finds no script, is measured too.
func TestRedisACLRulesAreExact(t *testing.T) {
	docs, err := os.ReadFile("../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range []string{aclSequencer, aclKeys, aclIndex, aclWait} {
		if !strings.Contains(string(docs), "`"+rule+"`") {
			t.Errorf("docs/redis.md does not give the rule `%s`", rule)
		}
	}
	r := testenv.RedisServerTLS(t)
	admin := r.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reserve := func(d Durability) func(context.Context, redis.UniversalClient) error {
		return func(ctx context.Context, c redis.UniversalClient) error {
			s, err := NewRedisSequencer(RedisSettings{Client: c, Durability: d})
			if err != nil {
				return err
			}
			_, err = s.Reserve(ctx, Request{Layout: DefaultLayout(), Server: 1, Worker: 2, N: 10})
			return err
		}
	}
	for _, c := range []struct {
		name string
		rule string
		use  func(context.Context, redis.UniversalClient) error
	}{
		{"sequencer", aclSequencer, reserve(Durability{})},
		{"wait", aclSequencer + " " + aclWait, reserve(Durability{Replicas: 1})},
		{"keys", aclSequencer + " " + aclKeys, func(ctx context.Context, c redis.UniversalClient) error {
			if err := reserve(Durability{})(ctx, c); err != nil {
				return err
			}
			ks, err := NewKeyStore(c, "", 0)
			if err != nil {
				return err
			}
			return ks.Claims(ctx, []Claim{{Key: []byte("order-1"), Source: "orders/0/1", Number: 42}})
		}},
		{"index", aclSequencer + " " + aclKeys + " " + aclIndex, func(ctx context.Context, c redis.UniversalClient) error {
			if err := reserve(Durability{})(ctx, c); err != nil {
				return err
			}
			ks, err := NewKeyStore(c, "", 0)
			if err != nil {
				return err
			}
			ks.IndexNumbers()
			return ks.Claims(ctx, []Claim{{Key: []byte("order-1"), Source: "orders/0/1", Number: 42},
				{Key: []byte("order-2"), Source: "orders/0/2", Number: 43, Prefilled: true}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			try := func(perms []string) error {
				t.Helper()
				args := []any{"ACL", "SETUSER", "worker", "reset", "on", ">s3cret"}
				for _, p := range perms {
					args = append(args, p)
				}
				for _, cmd := range [][]any{args, {"SCRIPT", "FLUSH"}, {"ACL", "LOG", "RESET"}} {
					if err := admin.Do(ctx, cmd...).Err(); err != nil {
						t.Fatalf("%v: %v", cmd, err)
					}
				}
				rc, _, err := NewRedisClientTLS("rediss://worker:s3cret@"+r.Addr+"/0", r.TLS.Config(t))
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				return c.use(ctx, rc)
			}
			perms := strings.Fields(c.rule)
			if err := try(perms); err != nil {
				t.Fatalf("with %q: %v", c.rule, err)
			}
			log, err := admin.Do(ctx, "ACL", "LOG").Slice()
			if err != nil {
				t.Fatal(err)
			}
			if len(log) != 0 {
				t.Errorf("with %q, Redis denied: %v", c.rule, log)
			}
			for i, p := range perms {
				if p == "-@all" {
					continue // reset starts from nothing: dropping it grants nothing
				}
				without := slices.Delete(slices.Clone(perms), i, i+1)
				if err := try(without); !denied(err) {
					t.Errorf("without %s: %v, want Redis to deny a command", p, err)
				}
			}
		})
	}
}

// NewRedisClientTLS's configuration is what the connection uses: without
// the server name the certificate carries, or without the client
// certificate the server requires, no command goes through; TLS settings
// for a URL without TLS are an ErrRedisURL.
func TestRedisClientTLSSettingsAreUsed(t *testing.T) {
	r := testenv.RedisServerTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(cfg *tls.Config) error {
		rc, _, err := NewRedisClientTLS("rediss://"+r.Addr+"/0?max_retries=-1", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		return rc.Ping(ctx).Err()
	}
	if err := ping(r.TLS.Config(t)); err != nil {
		t.Fatalf("with the CA, server name and client certificate: %v", err)
	}
	noName := r.TLS.Config(t)
	noName.ServerName = ""
	if err := ping(noName); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the server name: %v, want a certificate error", err)
	}
	if err := ping(r.TLS.CA.ClientConfig(t, testenv.RedisTLSServerName, "", "")); err == nil {
		t.Errorf("without a client certificate: no error")
	}
	if _, _, err := NewRedisClientTLS("redis://"+r.Addr+"/0", r.TLS.Config(t)); !errors.Is(err, ErrRedisURL) || !strings.Contains(err.Error(), "rediss://") {
		t.Errorf("TLS settings for redis://: %v, want ErrRedisURL naming rediss://", err)
	}
}

// Sentinel over TLS: the sentinels, the primary and its replicas speak
// only TLS with client certificates, and one NewRedisClientTLS
// configuration reaches all of them: the sequencer reserves through the
// primary the sentinels name and WAITs for a replica.
func TestRedisSentinelTLS(t *testing.T) {
	s := testenv.NewRedisSentinelsTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, info, err := NewRedisClientTLS(s.URL, s.TLS.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if info.Kind != RedisSentinel || !info.TLS {
		t.Fatalf("%s: %+v", s.URL, info)
	}
	seq, err := NewRedisSequencer(RedisSettings{Client: rc, Durability: Durability{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Reserve(ctx, Request{Layout: DefaultLayout(), Server: 1, Worker: 1, N: 10}); err != nil {
		t.Fatalf("reserve through Sentinel over TLS: %v", err)
	}
	if n := seq.NotReplicated(); n != 0 {
		t.Errorf("%d reservations not acknowledged by a replica", n)
	}
}

// Redis Cluster over TLS: every node speaks only TLS with client
// certificates (the cluster bus too), and the sequencer reserves on the
// slot's master and WAITs for its replica through one NewRedisClientTLS
// configuration.
func TestRedisClusterTLS(t *testing.T) {
	c := testenv.NewRedisClusterTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, info, err := NewRedisClientTLS(c.URL, c.TLS.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if info.Kind != RedisCluster || !info.TLS {
		t.Fatalf("%s: %+v", c.URL, info)
	}
	seq, err := NewRedisSequencer(RedisSettings{Client: rc, Durability: Durability{Replicas: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Reserve(ctx, Request{Layout: DefaultLayout(), Server: 1, Worker: 1, N: 10}); err != nil {
		t.Fatalf("reserve on Redis Cluster over TLS: %v", err)
	}
	if n := seq.NotReplicated(); n != 0 {
		t.Errorf("%d reservations not acknowledged by a replica", n)
	}
}
