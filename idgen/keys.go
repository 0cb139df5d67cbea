package idgen

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyTTL is how long a key keeps its number by default: a week.
const DefaultKeyTTL = 7 * 24 * time.Hour

// ErrKeyStore is a reply from Redis the key store cannot read.
var ErrKeyStore = errors.New("idgen: unexpected reply from the idempotency key store")

// KeyStore gives every idempotency key (an order reference, a record key)
// one number: the first number claimed for a key is the number of every
// later claim, for the TTL. The decision is one atomic SET NX GET per key in
// Redis, so it holds across processes, restarts and replays.
//
// Keys are "<prefix>:key:<key>" with no hash tag, so on Redis Cluster they
// spread over every slot by their own hash; a key longer than 128 bytes, or
// containing a brace (which would act as a hash tag), is stored as
// "<prefix>:key:#<base64url sha256 of it>".
//
// With IndexNumbers the store also keeps each number's key.
type KeyStore struct {
	client redis.Cmdable
	prefix string
	ttl    time.Duration
	wait   *waiter
	// numPrefix is the prefix of the number index ("" when off).
	numPrefix string
	base      string // the prefix given to NewKeyStore
}

// NewKeyStore returns a KeyStore on client. prefix "" means DefaultPrefix;
// ttl 0 means DefaultKeyTTL.
func NewKeyStore(client redis.Cmdable, prefix string, ttl time.Duration) (*KeyStore, error) {
	if client == nil {
		return nil, errors.New("idgen: key store needs a redis client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if ttl < 0 {
		return nil, fmt.Errorf("idgen: key ttl %s is negative", ttl)
	}
	if ttl == 0 {
		ttl = DefaultKeyTTL
	}
	return &KeyStore{client: client, prefix: prefix + ":key:", ttl: ttl, base: prefix}, nil
}

// IndexNumbers makes the store keep, beside each key's number, the
// number's key ("<prefix>:num:<number>", for the same TTL), so that a
// Prefilled claim of a number that another key holds is refused
// (Claim.Taken) instead of claimed: an order that arrives with the number
// of another order is caught before it reaches the output. It costs one
// more Redis key per claim. The index knows the numbers claimed while it
// is on; with Durable, its writes are not waited for.
func (s *KeyStore) IndexNumbers() { s.numPrefix = s.base + ":num:" }

// Durable makes every claim round trip wait for d.Replicas replicas (WAIT,
// on the connection of each primary that took claims) before any claimed
// number is used; claims they did not acknowledge fail with
// ErrNotReplicated. The client must be a *redis.Client (one node or
// Sentinel) or a *redis.ClusterClient. Replicas 0 turns it off.
func (s *KeyStore) Durable(d Durability) error {
	if d.Replicas == 0 {
		s.wait = nil
		return nil
	}
	w, err := newWaiter(d)
	if err != nil {
		return err
	}
	if err := canWait(s.client); err != nil {
		return err
	}
	s.wait = w
	return nil
}

// NotReplicated counts the claim round trips dropped because their
// replicas did not acknowledge them in time.
func (s *KeyStore) NotReplicated() uint64 {
	if s.wait == nil {
		return 0
	}
	return s.wait.failed.Load()
}

// Claim asks for key to get Number, on behalf of the record at Source (an
// opaque string that identifies one record, such as topic/partition/offset).
// After Claims, Number holds the key's number: the one claimed here if this
// was the first claim, else the first claim's. Repeat says the key's number
// was first claimed by a different source; a claim from the same source (a
// record read again after an aborted transaction) is not a repeat and gets
// the same number as before.
//
// Prefilled says Number is the record's own (it arrived with it), not one
// issued for it. With IndexNumbers, Taken says a Prefilled claim's number
// already belongs to another key while its own key has no number: the key
// was not claimed, and Number is unchanged. (A key that has a number is
// claimed as without the index: the same number, or a mismatch.)
type Claim struct {
	Key       []byte
	Source    string
	Number    int64
	Repeat    bool
	Prefilled bool
	Taken     bool
}

// Claims settles every claim in one pipelined round trip per Redis primary
// (on Redis Cluster the keys spread over the slots of every primary, and
// the primaries are asked in parallel; with IndexNumbers, Prefilled claims
// take one round trip more, first). Claims of the same key in one call
// are settled in order, so the first one wins. On error no claim is settled
// and the caller must not use any of the numbers.
func (s *KeyStore) Claims(ctx context.Context, claims []Claim) error {
	if len(claims) == 0 {
		return nil
	}
	keys := make([]string, len(claims))
	for i := range claims {
		keys[i] = s.redisKey(claims[i].Key)
		claims[i].Taken = false
	}
	if err := s.takenNumbers(ctx, claims, keys); err != nil {
		return err
	}
	cmds := make([]*redis.StatusCmd, len(claims))
	var err error
	if s.wait == nil {
		// go-redis splits a cluster pipeline by node by itself.
		pipe := s.client.Pipeline()
		s.queue(ctx, pipe, claims, keys, cmds, nil)
		s.queueIndex(ctx, pipe, claims, keys)
		if _, err = pipe.Exec(ctx); errors.Is(err, redis.Nil) {
			err = nil
		}
	} else if err = s.claimDurably(ctx, claims, keys, cmds); err == nil && s.numPrefix != "" {
		pipe := s.client.Pipeline()
		s.queueIndex(ctx, pipe, claims, keys)
		_, err = pipe.Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("idgen: claim %d idempotency keys: %w", len(claims), clusterErr(err))
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue // taken: not claimed
		}
		old, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue // the first claim: ours
		}
		if err != nil {
			return fmt.Errorf("idgen: claim idempotency key: %w", err)
		}
		num, src, ok := strings.Cut(old, "|")
		n, perr := ParseID(num)
		if !ok || perr != nil {
			return fmt.Errorf("%w: key %q holds %q", ErrKeyStore, claims[i].Key, old)
		}
		claims[i].Number = n
		claims[i].Repeat = src != claims[i].Source
	}
	return nil
}

// takenNumbers, with the index on, records the key of every Prefilled
// claim's number unless another key holds it already, in which case the
// claim is Taken unless its own key has a number (then the key's claim
// decides: the same number, or a mismatch). One pipelined SET NX GET of
// the number and GET of the key per Prefilled claim, before any key is
// claimed, so that a taken number never becomes a key's; SET NX decides
// one owner for a number however many claim it at once.
func (s *KeyStore) takenNumbers(ctx context.Context, claims []Claim, keys []string) error {
	if s.numPrefix == "" {
		return nil
	}
	var pipe redis.Pipeliner
	owners := make([]*redis.StatusCmd, len(claims))
	held := make([]*redis.StringCmd, len(claims))
	for i := range claims {
		if claims[i].Prefilled {
			if pipe == nil {
				pipe = s.client.Pipeline()
			}
			owners[i] = pipe.SetArgs(ctx, s.numKey(claims[i].Number), keys[i], redis.SetArgs{Mode: "NX", Get: true, TTL: s.ttl})
			held[i] = pipe.Get(ctx, keys[i])
		}
	}
	if pipe == nil {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("idgen: check %d pre-filled numbers: %w", len(claims), clusterErr(err))
	}
	for i, cmd := range owners {
		if cmd == nil {
			continue
		}
		owner, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue // the number's first claim: ours
		}
		if err != nil {
			return fmt.Errorf("idgen: check a pre-filled number: %w", err)
		}
		_, err = held[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			claims[i].Taken = owner != keys[i]
		case err != nil:
			return fmt.Errorf("idgen: check a pre-filled number's key: %w", err)
		}
	}
	return nil
}

// queueIndex adds to p, with the index on, the SET NX of the number of
// every claim that is not Prefilled (those are indexed by takenNumbers):
// a number issued for a key is that key's from now on.
func (s *KeyStore) queueIndex(ctx context.Context, p redis.Pipeliner, claims []Claim, keys []string) {
	if s.numPrefix == "" {
		return
	}
	for i := range claims {
		if !claims[i].Prefilled {
			p.SetArgs(ctx, s.numKey(claims[i].Number), keys[i], redis.SetArgs{Mode: "NX", TTL: s.ttl})
		}
	}
}

func (s *KeyStore) numKey(n int64) string {
	return s.numPrefix + strconv.FormatInt(n, 10)
}

// queue adds the SET NX GET of the claims at idx (all of them if idx is
// nil) to p; a Taken claim is skipped (its cmd stays nil).
func (s *KeyStore) queue(ctx context.Context, p redis.Pipeliner, claims []Claim, keys []string, cmds []*redis.StatusCmd, idx []int) {
	var val []byte
	one := func(i int) {
		c := &claims[i]
		if c.Taken {
			return
		}
		val = append(strconv.AppendInt(val[:0], c.Number, 10), '|')
		val = append(val, c.Source...)
		cmds[i] = p.SetArgs(ctx, keys[i], string(val), redis.SetArgs{Mode: "NX", Get: true, TTL: s.ttl})
	}
	if idx == nil {
		for i := range claims {
			one(i)
		}
		return
	}
	for _, i := range idx {
		one(i)
	}
}

// claimDurably groups the claims by the primary that serves their keys
// and sends each group, followed by WAIT, in one pipeline on one
// connection of that primary; the primaries are asked in parallel.
func (s *KeyStore) claimDurably(ctx context.Context, claims []Claim, keys []string, cmds []*redis.StatusCmd) error {
	type group struct {
		node *redis.Client
		idx  []int
	}
	var groups []*group
	byNode := map[*redis.Client]*group{}
	for i, k := range keys {
		n, err := nodeFor(ctx, s.client, k)
		if err != nil {
			return err
		}
		g := byNode[n]
		if g == nil {
			g = &group{node: n}
			byNode[n] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[gi] = s.wait.run(ctx, s.client, g.node, func(p redis.Pipeliner) {
				s.queue(ctx, p, claims, keys, cmds, g.idx)
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *KeyStore) redisKey(key []byte) string {
	if len(key) > 128 || strings.ContainsAny(string(key), "{}") {
		sum := sha256.Sum256(key)
		return s.prefix + "#" + base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return s.prefix + string(key)
}

// Every Redis key the project writes, by owner:
//
//	{<prefix>}:seq:<server>:<worker>  the sequencer's state (RedisSequencer)
//	{<prefix>}:layout                 the layout the sequencer was set up with
//	<prefix>:key:<key>                an idempotency key's number (KeyStore)
//	<prefix>:num:<number>             a number's idempotency key (KeyStore.IndexNumbers)
//	<prefix>:replay:<replay id>       a replay's resolved ranges (ReplayKey)

// ReplayKey is the key under which a replay keeps the offsets its bounds
// resolved to on its first run, so that a resumed replay stops where the
// first one meant to. prefix is used as given (the replay command passes
// its --redis-prefix).
func ReplayKey(prefix, id string) string { return prefix + ":replay:" + id }
