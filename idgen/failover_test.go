package idgen

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flakestream/flakestream/test/testenv"
)

// A promoted replica that missed the last reservation, made
// deterministic: replication is cut just before the reservation, the
// primary dies, the replica is promoted.
//
// With WAIT 1 the reservation the replica missed is refused
// (ErrNotReplicated) and none of its numbers is used; the promoted
// replica then issues numbers above every number used. With WAIT 0 the
// missed reservation's number is used, and the promoted replica's state
// does not know it: only its clock being past that millisecond keeps it
// from issuing the number again (on one host it is; a new primary whose
// clock is behind by more than the failover took would not be).
func TestPromotedReplicaMissedLastReservation(t *testing.T) {
	for _, wait := range []int{1, 0} {
		t.Run(map[int]string{1: "wait=1", 0: "wait=0"}[wait], func(t *testing.T) {
			pair := testenv.NewRedisPair(t)
			ctx := context.Background()
			newGen := func(addr string) (*Generator, *RedisSequencer) {
				c, _ := haClient(t, "redis://"+addr+"/0")
				// The WAIT bound only has to outlast the replica's ack on a
				// loaded machine (after the cut it is what the refused
				// reservation waits out), and stay under the client's 3 s
				// read timeout.
				s, err := NewRedisSequencer(RedisSettings{Client: c, Prefix: "promo", Durability: Durability{Replicas: wait, Timeout: 2 * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				return mustGenerator(t, Settings{ServerID: 1, WorkerID: 2, Sequencer: s}), s
			}
			g, seq := newGen(pair.Primary.Addr)
			used, err := g.NextN(ctx, 1000) // replicated (or, with 0, very likely so)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				time.Sleep(200 * time.Millisecond) // let the replica catch up
			}
			pair.Cut()
			missed, err := g.Next(ctx)
			switch {
			case wait == 1 && !errors.Is(err, ErrNotReplicated):
				t.Fatalf("reservation after the cut: %v, %v; want ErrNotReplicated", missed, err)
			case wait == 1 && seq.NotReplicated() != 1:
				t.Fatalf("NotReplicated = %d, want 1", seq.NotReplicated())
			case wait == 0 && err != nil:
				t.Fatal(err)
			case wait == 0:
				used = append(used, missed)
			}
			// The primary did make the reservation: its state is past
			// every number used.
			onPrimary := stateOf(t, pair.Primary, seq.Key(1, 2))
			pair.Primary.Kill()
			pair.Promote(t)
			onReplica := stateOf(t, pair.Replica, seq.Key(1, 2))
			if !(onReplica[0] < onPrimary[0] || onReplica[0] == onPrimary[0] && onReplica[1] < onPrimary[1]) {
				t.Fatalf("the replica has state %v, the primary had %v: the cut did not cut", onReplica, onPrimary)
			}
			l := DefaultLayout()
			last := used[len(used)-1]
			lastParts, _ := l.Decompose(last)
			knows := onReplica[0] > lastParts.UnixMs || onReplica[0] == lastParts.UnixMs && onReplica[1] >= lastParts.Sequence
			if wait == 1 && !knows {
				t.Fatalf("WAIT 1: the promoted replica (%v) does not know the last used number %d (ms %d seq %d)", onReplica, last, lastParts.UnixMs, lastParts.Sequence)
			}
			if wait == 0 {
				if knows {
					t.Fatalf("WAIT 0: the replica knows the number issued after the cut; the test cut nothing")
				}
				t.Logf("WAIT 0: number %d (ms %d seq %d) was used, and the promoted replica's state (ms %d seq %d) does not know it; only its clock now guards it",
					last, lastParts.UnixMs, lastParts.Sequence, onReplica[0], onReplica[1])
			}
			g2, _ := newGen(pair.Replica.Addr)
			after, err := g2.NextN(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if after[0] <= last {
				t.Fatalf("the promoted replica issued %d, not above the last used %d", after[0], last)
			}
		})
	}
}

// stateOf reads the sequencer's {ms, seq} of one pair from one server.
func stateOf(t *testing.T, p *testenv.RedisProc, key string) [2]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := p.Client(t).HMGet(ctx, key, "ms", "seq").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [2]int64
	for i, x := range v {
		s, _ := x.(string)
		out[i], _ = ParseID(s)
	}
	return out
}
