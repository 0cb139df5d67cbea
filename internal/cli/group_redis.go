package cli

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The redis group: where the sequencer and the idempotency keys live, and
// which sequencer numbers.
const (
	flagRedis             = "redis"
	flagRedisPrefix       = "redis-prefix"
	flagRedisWaitReplicas = "redis-wait-replicas"
	flagRedisWaitTimeout  = "redis-wait-timeout"
	flagSequencer         = "sequencer"
	flagRedisTLSCA        = "redis-tls-ca"
	flagRedisTLSCert      = "redis-tls-cert"
	flagRedisTLSKey       = "redis-tls-key"
	flagRedisTLSServer    = "redis-tls-server-name"
)

// defaultRedisWaitReplicas lets the URL decide: 1 for cluster and sentinel
// URLs, 0 for one node.
const defaultRedisWaitReplicas = "auto"

// The sequencers --sequencer names.
const (
	sequencerRedis  = "redis"
	sequencerMemory = "memory"
)

type redisConfig struct {
	url, prefix  string
	waitReplicas string
	waitTimeout  time.Duration
	tlsFiles     tlsFiles
}

// redisURLUsage names every topology --redis takes.
const redisURLUsage = "Redis `URL`: redis://[user:password@]host:port/db for one node; redis+cluster://[user:password@]h1:p1,h2:p2 for Redis Cluster; redis+sentinel://[user:password@]s1:p1,s2:p2/MASTER[?db=N&sentinel_password=...] for Sentinel; rediss... for TLS"

func (r *redisConfig) flags() []cli.Flag {
	return concat([]cli.Flag{
		redisURLFlag(&r.url, idgen.DefaultRedisURL, redisURLUsage),
		stringFlag(flagRedisPrefix, &r.prefix, idgen.DefaultPrefix, "prefix of every Redis key flakestream writes"),
		stringFlag(flagRedisWaitReplicas, &r.waitReplicas, defaultRedisWaitReplicas, "before using a reservation or key claim, WAIT for this many replicas (or all the primary has, if fewer): auto is 1 for cluster and sentinel URLs, 0 for one node"),
		durationFlag(flagRedisWaitTimeout, &r.waitTimeout, idgen.DefaultWaitTimeout, "how long one WAIT for replicas may take; a reservation not acknowledged in time is dropped and asked again"),
	}, r.tlsFiles.flags(flagRedisTLSCA, flagRedisTLSCert, flagRedisTLSKey,
		"PEM `FILE` of CAs to trust for a rediss URL: the server, every cluster node and the sentinels (default: the system pool)",
		"PEM `FILE` of a client certificate for Redis mTLS",
		"PEM `FILE` of the Redis client certificate's key"), []cli.Flag{
		r.tlsFiles.serverNameFlag(flagRedisTLSServer, "name the Redis servers' certificates must carry, when it is not the host in the URL (or, for cluster nodes and Sentinel's data nodes, the address they announce)"),
	})
}

// client returns the client --redis names, for any topology, over TLS
// with the --redis-tls-* settings when they are given.
func (r *redisConfig) client() (redis.UniversalClient, error) {
	var tlsCfg *tls.Config
	if r.tlsFiles.given() {
		info, err := idgen.ParseRedisURL(r.url)
		if err != nil {
			return nil, asUsage(err)
		}
		if !info.TLS {
			return nil, usageErr("--%s, --%s, --%s and --%s are for TLS: the --%s URL %s has none (use rediss://, rediss+cluster:// or rediss+sentinel://)",
				flagRedisTLSCA, flagRedisTLSCert, flagRedisTLSKey, flagRedisTLSServer, flagRedis, info.Redacted)
		}
		if tlsCfg, err = r.tlsFiles.config(); err != nil {
			return nil, asUsage(err)
		}
	}
	rc, _, err := idgen.NewRedisClientTLS(r.url, tlsCfg)
	if err != nil {
		return nil, asUsage(err)
	}
	// go-redis logs every failed dial and sentinel lookup on stderr, many
	// lines a second during an outage; flakestream reports the error that
	// matters itself, in one line.
	redis.SetLogger(quietRedis{})
	return rc, nil
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// durability is what the --redis-wait-* flags ask of every reservation and
// key claim before its numbers are used.
func (r *redisConfig) durability() (idgen.Durability, error) {
	info, err := idgen.ParseRedisURL(r.url)
	if err != nil {
		return idgen.Durability{}, asUsage(err)
	}
	d, err := info.Durability(r.waitReplicas, r.waitTimeout)
	if err != nil {
		return idgen.Durability{}, asUsage(err)
	}
	return d, nil
}

// redisURLFlag is --redis; bench gives it no default (an embedded Redis).
func redisURLFlag(dst *string, value, usage string) cli.Flag {
	return stringFlag(flagRedis, dst, value, usage)
}

func sequencerFlag(dst *string) cli.Flag {
	return stringFlag(flagSequencer, dst, sequencerRedis, "redis (any number of processes), or memory (this process only: for trying things out, not for production)")
}

// generator builds the generator the flags describe. rc is the Redis client
// to use, or nil for one of its own (which close releases); a command that
// also needs Redis for something else passes its client, so there is one
// connection pool. wrap, if not nil, wraps the sequencer (to time it).
func (r *redisConfig) generator(kind string, l idgen.Layout, server, worker int64, rc redis.UniversalClient, wrap func(idgen.Sequencer) idgen.Sequencer) (g *idgen.Generator, close func(), err error) {
	var seq idgen.Sequencer
	close = func() {}
	switch kind {
	case sequencerMemory:
		seq = idgen.NewMemorySequencer(nil)
	case sequencerRedis:
		d, err := r.durability()
		if err != nil {
			return nil, nil, err
		}
		if rc == nil {
			client, err := r.client()
			if err != nil {
				return nil, nil, err
			}
			rc, close = client, func() { client.Close() }
		}
		if seq, err = idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc, Prefix: r.prefix, Durability: d}); err != nil {
			close()
			return nil, nil, err
		}
	default:
		return nil, nil, usageErr("--%s %q: want redis or memory", flagSequencer, kind)
	}
	if wrap != nil {
		seq = wrap(seq)
	}
	g, err = idgen.New(idgen.Settings{Layout: l, ServerID: server, WorkerID: worker, Sequencer: seq})
	if err != nil {
		close()
		return nil, nil, err
	}
	return g, close, nil
}
