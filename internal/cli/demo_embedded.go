package cli

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// embedded is the in-process stack both demos number on: a kfake cluster
// with the demo's topics, a miniredis, the generator (server 1, worker 1)
// that reserves from it, and the JSON codec.
type embedded struct {
	brokers []string
	gen     *idgen.Generator
	cd      *codec.Codec
	closers []func() // run last to first by close
}

// startEmbedded starts the stack with parts partitions per topic and the
// given broker configuration (nil: kfake's). wrap, if set, wraps the
// sequencer (to time it). On an error, what was started is closed.
func startEmbedded(parts int32, topics []string, brokerCfg map[string]string, wrap func(idgen.Sequencer) idgen.Sequencer) (_ *embedded, err error) {
	emb := &embedded{}
	defer func() {
		if err != nil {
			emb.close()
		}
	}()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(parts, topics...)}
	if brokerCfg != nil {
		opts = append(opts, kfake.BrokerConfigs(brokerCfg))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	emb.closers = append(emb.closers, cluster.Close)
	emb.brokers = cluster.ListenAddrs()
	mr, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	emb.closers = append(emb.closers, mr.Close)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	emb.closers = append(emb.closers, func() { rc.Close() })

	var seq idgen.Sequencer
	if seq, err = idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc}); err != nil {
		return nil, err
	}
	if wrap != nil {
		seq = wrap(seq)
	}
	if emb.gen, err = idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq}); err != nil {
		return nil, err
	}
	// A 64 KiB limit, so that the demo's oversized orders are
	// dead-lettered as too_large.
	if emb.cd, err = codec.New(codec.Config{MaxBytes: 64 << 10}); err != nil {
		return nil, err
	}
	return emb, nil
}

func (emb *embedded) close() {
	for i := len(emb.closers) - 1; i >= 0; i-- {
		emb.closers[i]()
	}
}
