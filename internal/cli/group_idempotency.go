package cli

import (
	"time"

	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// The idempotency group: one order key, one number.
const (
	flagIdempotencyKey      = "idempotency-key"
	flagIdempotencyTTL      = "idempotency-ttl"
	flagIdempotencyOptional = "idempotency-optional"
	flagOnRepeat            = "on-repeat"
	flagNumberIndex         = "idempotency-number-index"
)

type idempotencyConfig struct {
	key      string
	ttl      time.Duration
	optional bool
	onRepeat string
	index    bool
}

func (ic *idempotencyConfig) flags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagIdempotencyKey, &ic.key, "", "give records with the same key the same number: key (the Kafka record key), field:<name> (a top-level field of the value) or header:<name> (a record header); off by default"),
		durationFlag(flagIdempotencyTTL, &ic.ttl, idgen.DefaultKeyTTL, "how long a key keeps its number"),
		boolFlag(flagIdempotencyOptional, &ic.optional, "number a record without the key like any other, instead of dead-lettering it as missing_key"),
		stringFlag(flagOnRepeat, &ic.onRepeat, pipeline.DefaultOnRepeat, "a record whose key already has a number: emit it with that number and flakestream-repeat: true, or drop it (counted)"),
		boolFlag(flagNumberIndex, &ic.index, "also keep each number's key in Redis, so that a pre-filled number another key already has (another order's) is dead-lettered as number_taken; one more Redis key per number for --idempotency-ttl"),
	}
}

// enabled says whether an idempotency key is configured.
func (ic *idempotencyConfig) enabled() bool { return ic.key != "" }

// idempotency returns the idempotency the flags ask for, or nil.
func (ic *idempotencyConfig) idempotency(rc redis.Cmdable, r *redisConfig) (*pipeline.Idempotency, error) {
	if !ic.enabled() {
		if ic.index {
			return nil, usageErr("--%s needs --%s: the index keeps each number's idempotency key", flagNumberIndex, flagIdempotencyKey)
		}
		return nil, nil
	}
	spec, err := pipeline.ParseKeySpec(ic.key)
	if err != nil {
		return nil, asUsage(err)
	}
	drop, err := pipeline.ParseOnRepeat(ic.onRepeat)
	if err != nil {
		return nil, asUsage(err)
	}
	store, err := idgen.NewKeyStore(rc, r.prefix, ic.ttl)
	if err != nil {
		return nil, asUsage(err)
	}
	d, err := r.durability()
	if err != nil {
		return nil, err
	}
	if err := store.Durable(d); err != nil {
		return nil, asUsage(err)
	}
	if ic.index {
		store.IndexNumbers()
	}
	return &pipeline.Idempotency{Store: store, Field: spec.Field, Header: spec.Header, Optional: ic.optional, Drop: drop}, nil
}
