package demo

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// StartKafka starts a one-broker kfake cluster with parts partitions for
// each of topics (none: the cluster creates topics as asked) and the given
// broker configuration (nil: kfake's). It returns the seed addresses and
// the cluster's Close.
func StartKafka(parts int32, topics []string, brokerCfg map[string]string) ([]string, func(), error) {
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(parts, topics...))
	}
	if brokerCfg != nil {
		opts = append(opts, kfake.BrokerConfigs(brokerCfg))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("start kfake: %w", err)
	}
	return cluster.ListenAddrs(), cluster.Close, nil
}

// StartRedis starts a miniredis and returns a client of it, and a stop
// that closes both.
func StartRedis() (*redis.Client, func(), error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, fmt.Errorf("start miniredis: %w", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rc, func() { rc.Close(); mr.Close() }, nil
}

// Embedded is the in-process stack both demos number on: a kfake cluster
// with the demo's topics, a miniredis, the generator (server 1, worker 1)
// that reserves from it, and the JSON codec.
type Embedded struct {
	Brokers []string
	Gen     *idgen.Generator
	Codec   *codec.Codec
	closers []func() // run last to first by Close
}

// StartEmbedded starts the stack with parts partitions per topic and the
// given broker configuration (nil: kfake's). wrap, if set, wraps the
// sequencer (to time it). On an error, what was started is closed.
func StartEmbedded(parts int32, topics []string, brokerCfg map[string]string, wrap func(idgen.Sequencer) idgen.Sequencer) (_ *Embedded, err error) {
	emb := &Embedded{}
	defer func() {
		if err != nil {
			emb.Close()
		}
	}()
	brokers, stopKafka, err := StartKafka(parts, topics, brokerCfg)
	if err != nil {
		return nil, err
	}
	emb.closers = append(emb.closers, stopKafka)
	emb.Brokers = brokers
	rc, stopRedis, err := StartRedis()
	if err != nil {
		return nil, err
	}
	emb.closers = append(emb.closers, stopRedis)

	var seq idgen.Sequencer
	if seq, err = idgen.NewRedisSequencer(idgen.RedisSettings{Client: rc}); err != nil {
		return nil, err
	}
	if wrap != nil {
		seq = wrap(seq)
	}
	if emb.Gen, err = idgen.New(idgen.Settings{ServerID: 1, WorkerID: 1, Sequencer: seq}); err != nil {
		return nil, err
	}
	// A 64 KiB limit, so that the demo's oversized orders are
	// dead-lettered as too_large.
	if emb.Codec, err = codec.New(codec.Config{MaxBytes: MaxBytes}); err != nil {
		return nil, err
	}
	return emb, nil
}

// MaxBytes is the demo's limit on an order's size, above which an order
// is dead-lettered as too_large: the demo's mix has a few.
const MaxBytes = 64 << 10

// Close stops what StartEmbedded started, last started first.
func (emb *Embedded) Close() {
	for i := len(emb.closers) - 1; i >= 0; i-- {
		emb.closers[i]()
	}
}
