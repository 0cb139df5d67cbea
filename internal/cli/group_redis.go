package cli

import (
	"github.com/flakestream/flakestream/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The redis group: where the sequencer and the idempotency keys live, and
// which sequencer numbers.
const (
	flagRedis       = "redis"
	flagRedisPrefix = "redis-prefix"
	flagSequencer   = "sequencer"
)

// The sequencers --sequencer names.
const (
	sequencerRedis  = "redis"
	sequencerMemory = "memory"
)

type redisConfig struct {
	url, prefix string
}

func (r *redisConfig) flags() []cli.Flag {
	return []cli.Flag{
		redisURLFlag(&r.url, idgen.DefaultRedisURL, "Redis `URL`: redis://[user:password@]host:port/db, rediss:// for TLS"),
		stringFlag(flagRedisPrefix, &r.prefix, idgen.DefaultPrefix, "prefix of every Redis key flakestream writes"),
	}
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
func (r *redisConfig) generator(kind string, l idgen.Layout, server, worker int64, rc *redis.Client, wrap func(idgen.Sequencer) idgen.Sequencer) (g *idgen.Generator, close func(), err error) {
	var seq idgen.Sequencer
	close = func() {}
	switch kind {
	case sequencerMemory:
		seq = idgen.NewMemorySequencer(nil)
	case sequencerRedis:
		if rc == nil {
			client, err := idgen.RedisClient(r.url)
			if err != nil {
				return nil, nil, err
			}
			rc, close = client, func() { client.Close() }
		}
		if seq, err = idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc, Prefix: r.prefix}); err != nil {
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
