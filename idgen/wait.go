package idgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWaitTimeout is how long a reservation waits for its replicas by
// default before it is abandoned.
const DefaultWaitTimeout = 100 * time.Millisecond

// ErrNotReplicated is a reservation or a key claim that fewer replicas
// acknowledged than were asked for within the wait timeout. Its numbers
// are not used: a failover now could promote a replica without them and
// hand them out again. It passes like an outage; ask again.
var ErrNotReplicated = errors.New("idgen: redis write not acknowledged by the replicas asked for")

// ErrNotClusterNode is a redis+cluster:// seed that is not a Redis Cluster
// node; it is a configuration error, not an outage.
var ErrNotClusterNode = errors.New("idgen: redis+cluster:// names a server that is not a Redis Cluster node (cluster support disabled)")

// Durability asks that every write this package makes to Redis is on
// replicas before any number it reserved or claimed is used.
type Durability struct {
	// Replicas is N in WAIT N: 0 turns waiting off (the default). A
	// primary with fewer connected replicas than N waits for all of those
	// it has, so a primary that lost its replicas keeps issuing.
	Replicas int
	// Timeout bounds one WAIT, overriding the default 100ms.
	Timeout time.Duration
}

// waiter runs a batch of writes and a WAIT on one connection of the
// primary that serves them: WAIT counts the writes of its own connection,
// so the script and the WAIT must share one. It remembers each primary's
// connected replicas so that it never asks one for more than it has.
type waiter struct {
	d        Durability
	replicas sync.Map // primary address -> int: connected replicas last seen
	failed   atomic.Uint64
}

func newWaiter(d Durability) (*waiter, error) {
	if d.Replicas < 0 {
		return nil, fmt.Errorf("idgen: wait for %d replicas: want 0 or more", d.Replicas)
	}
	if d.Timeout < 0 {
		return nil, fmt.Errorf("idgen: wait timeout %s is negative", d.Timeout)
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultWaitTimeout
	}
	return &waiter{d: d}, nil
}

// node returns the client of the one primary that serves key: the client
// itself for one node or Sentinel (a pipeline there runs on one
// connection), the slot's master for a cluster.
func nodeFor(ctx context.Context, c any, key string) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, clusterErr(err)
		}
		return n, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("idgen: waiting for replicas needs a *redis.Client or *redis.ClusterClient, not %T", c)
}

// clusterErr makes the error of a seed that is not a cluster node say so.
func clusterErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "cluster support disabled") {
		return fmt.Errorf("%w: %v", ErrNotClusterNode, err)
	}
	return err
}

// run sends INFO replication, the commands that queue adds, and WAIT, in
// one pipeline on one connection of node, and then checks that as many
// replicas acknowledged as the primary had connected (at most Replicas).
// A MOVED or connection error makes a cluster client reload its slots.
func (w *waiter) run(ctx context.Context, cluster any, node *redis.Client, queue func(redis.Pipeliner)) error {
	addr := node.Options().Addr
	ask := w.d.Replicas
	if v, ok := w.replicas.Load(addr); ok {
		ask = min(ask, v.(int))
	}
	var info *redis.StringCmd
	var wait *redis.Cmd
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "replication")
		queue(p)
		wait = p.Do(ctx, "WAIT", ask, w.d.Timeout.Milliseconds())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		if cc, ok := cluster.(*redis.ClusterClient); ok && !redis.HasErrorPrefix(err, "NOSCRIPT") {
			cc.ReloadState(ctx)
		}
		return clusterErr(err)
	}
	if info.Err() != nil || wait.Err() != nil {
		return errors.Join(info.Err(), wait.Err())
	}
	connected, role := parseReplication(info.Val())
	if role != "master" {
		if cc, ok := cluster.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		return fmt.Errorf("idgen: %s is a %s, not a primary", addr, role)
	}
	w.replicas.Store(addr, connected)
	need := min(w.d.Replicas, connected)
	acked, err := wait.Int()
	if err != nil {
		return err
	}
	if acked < need {
		w.failed.Add(1)
		return fmt.Errorf("%w: %d of %d on %s within %s", ErrNotReplicated, acked, need, addr, w.d.Timeout)
	}
	return nil
}

// parseReplication reads connected_slaves and role from INFO replication.
func parseReplication(info string) (connected int, role string) {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			connected, _ = strconv.Atoi(v)
		} else if v, ok := strings.CutPrefix(line, "role:"); ok {
			role = v
		}
	}
	return connected, role
}

// Permanent reports whether err is a configuration error that retrying
// cannot cure (a bad URL, an unknown master name, a seed that is not a
// cluster node, refused credentials, a refused layout change), as opposed
// to an outage or a failover, which pass.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrRedisURL) || errors.Is(err, ErrUnknownMaster) || errors.Is(err, ErrNotClusterNode) || errors.Is(err, ErrLayoutChange) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "NOPERM")
}
