package idgen

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed sequencer.lua
var sequencerLua string

// sequencerScript runs with EVALSHA and falls back to EVAL when Redis does
// not have it cached (a restart, a failover, SCRIPT FLUSH).
var sequencerScript = redis.NewScript(sequencerLua)

// DefaultPrefix is the default key prefix of the Redis sequencer.
const DefaultPrefix = "flakestream"

// ErrRedisReply is a reply from the script that this package cannot read.
var ErrRedisReply = errors.New("idgen: unexpected reply from the redis sequencer script")

// RedisSettings configures a RedisSequencer.
type RedisSettings struct {
	// Client runs the script: a *redis.Client, *redis.ClusterClient or
	// *redis.Ring. Required.
	Client redis.Scripter
	// Prefix namespaces the keys, overriding the default "flakestream".
	// Keys are "{prefix}:seq:<server>:<worker>" and "{prefix}:layout": the
	// braces are a hash tag, so on Redis Cluster all of them share a slot.
	Prefix string
	// Durability, when its Replicas is above 0, makes every reservation
	// wait for that many replicas (WAIT, on the connection that ran the
	// script) before its numbers are used; a reservation they did not
	// acknowledge fails with ErrNotReplicated. The Client must then be a
	// *redis.Client (one node, or Sentinel's failover client) or a
	// *redis.ClusterClient.
	Durability Durability
	// MaxAdoptWait bounds the wait a layout change may impose before its
	// first number, overriding the default 2s; longer changes are refused
	// with ErrLayoutChange.
	MaxAdoptWait time.Duration
}

// RedisSequencer reserves sequence numbers with one Lua script call per
// block, by the Redis server's clock. Any number of processes may share one
// (server, worker) pair through it.
type RedisSequencer struct {
	client       redis.Scripter
	wait         *waiter
	prefix       string
	layoutKey    string
	maxAdoptWait int64
}

// NewRedisSequencer validates the settings and returns a RedisSequencer. It
// does not contact Redis; the first Reserve does.
func NewRedisSequencer(s RedisSettings) (*RedisSequencer, error) {
	if s.Client == nil {
		return nil, errors.New("idgen: redis sequencer needs a client")
	}
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.MaxAdoptWait <= 0 {
		s.MaxAdoptWait = DefaultMaxAdoptWait
	}
	tag := "{" + s.Prefix + "}"
	r := &RedisSequencer{client: s.Client, prefix: tag, layoutKey: tag + ":layout", maxAdoptWait: s.MaxAdoptWait.Milliseconds()}
	if s.Durability.Replicas > 0 {
		w, err := newWaiter(s.Durability)
		if err != nil {
			return nil, err
		}
		if err := canWait(s.Client); err != nil {
			return nil, err
		}
		r.wait = w
	} else if s.Durability.Replicas < 0 {
		return nil, fmt.Errorf("idgen: wait for %d replicas: want 0 or more", s.Durability.Replicas)
	}
	return r, nil
}

// Key returns the Redis key that holds the state of one (server, worker).
func (r *RedisSequencer) Key(server, worker int64) string {
	return r.prefix + ":seq:" + strconv.FormatInt(server, 10) + ":" + strconv.FormatInt(worker, 10)
}

// Reserve implements Sequencer. Every Redis error comes back wrapped with
// what was being done; a number is never made up.
func (r *RedisSequencer) Reserve(ctx context.Context, req Request) (Block, error) {
	id := req.LayoutID
	if id == "" {
		id = req.Layout.fingerprint()
	}
	keys := []string{r.Key(req.Server, req.Worker), r.layoutKey}
	args := []any{req.N, req.Layout.MaxSequence(), id, req.Layout.EpochMs(), req.Layout.TimeShift(), r.maxAdoptWait}
	if r.wait != nil {
		return r.reserveDurably(ctx, keys, args, id)
	}
	res, err := sequencerScript.Run(ctx, r.client, keys, args...).Slice()
	if err != nil {
		return Block{}, fmt.Errorf("redis sequencer script: %w", clusterErr(err))
	}
	return parseReply(res, id)
}

// reserveDurably runs the script and WAIT in one pipeline on one
// connection of the primary that holds the keys: one round trip, and the
// block is returned only once the replicas have it.
func (r *RedisSequencer) reserveDurably(ctx context.Context, keys []string, args []any, id string) (Block, error) {
	node, err := nodeFor(ctx, r.client, keys[0])
	if err != nil {
		return Block{}, fmt.Errorf("redis sequencer: %w", err)
	}
	var cmd *redis.Cmd
	for _, eval := range []bool{false, true} {
		err = r.wait.run(ctx, r.client, node, func(p redis.Pipeliner) {
			if eval {
				cmd = sequencerScript.Eval(ctx, p, keys, args...)
			} else {
				cmd = sequencerScript.EvalSha(ctx, p, keys, args...)
			}
		})
		if cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			continue
		}
		break
	}
	if cmd.Err() != nil {
		return Block{}, fmt.Errorf("redis sequencer script: %w", clusterErr(cmd.Err()))
	}
	if err != nil {
		// The reply came, but not the replicas' acknowledgement: the
		// block is dropped (a gap), never used.
		return Block{}, fmt.Errorf("redis sequencer: %w", err)
	}
	res, err := cmd.Slice()
	if err != nil {
		return Block{}, fmt.Errorf("redis sequencer script: %w", err)
	}
	return parseReply(res, id)
}

// NotReplicated counts the reservations dropped because their replicas did
// not acknowledge them in time.
func (r *RedisSequencer) NotReplicated() uint64 {
	if r.wait == nil {
		return 0
	}
	return r.wait.failed.Load()
}

// canWait says whether c is a client whose writes WAIT can follow.
func canWait(c any) error {
	switch c.(type) {
	case *redis.ClusterClient, *redis.Client:
		return nil
	}
	return fmt.Errorf("idgen: waiting for replicas needs a *redis.Client or *redis.ClusterClient, not %T", c)
}

func parseReply(res []any, id string) (Block, error) {
	ints := make([]int64, 0, 4)
	for _, v := range res {
		if i, ok := v.(int64); ok {
			ints = append(ints, i)
		}
	}
	if len(ints) < 2 {
		return Block{}, fmt.Errorf("%w: %v", ErrRedisReply, res)
	}
	switch ints[0] {
	case 1:
		if len(ints) != 4 {
			return Block{}, fmt.Errorf("%w: %v", ErrRedisReply, res)
		}
		return Block{UnixMs: ints[1], First: ints[2], Count: ints[3]}, nil
	case 0:
		return Block{Wait: time.Duration(ints[1]) * time.Microsecond}, nil
	case -1:
		old := ""
		if len(res) == 3 {
			old, _ = res[2].(string)
		}
		return Block{}, fmt.Errorf("%w: numbers were issued under layout %s; layout %s could issue no number above them before %s; keep the old layout, or move to new server/worker IDs",
			ErrLayoutChange, old, id, time.UnixMilli(ints[1]).UTC().Format(time.RFC3339Nano))
	}
	return Block{}, fmt.Errorf("%w: %v", ErrRedisReply, res)
}
