package kfakerepro

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	group = "g"
	topic = "t"
	parts = 4

	// sessionTimeout is the shortest kfake (and Kafka) accepts by default
	// (group.min.session.timeout.ms).
	sessionTimeout = 6 * time.Second
	// rebalanceTimeout is kgo's default. It is long on purpose: a member
	// that never rejoins is dropped when a later rebalance times out on
	// it, and the test must see what the session timer does, not that.
	rebalanceTimeout = 60 * time.Second
	// margin is the time the test allows, past the session timeout, for
	// the expiry, the rebalance it starts and the live member's rejoin
	// (its heartbeat interval is 1 s).
	margin = 4 * time.Second
	// deadJoiners is the number of members killed while their JoinGroup
	// waits. Each one escapes its session timer on today's kfake with
	// probability 1/2 (see TestDeadJoinerIsExpired), so 16 make a run that
	// misses the bug a 1-in-65536 event.
	deadJoiners = 16
)

// enabled skips the test unless FLAKESTREAM_KFAKE_REPRO=1: these tests
// document an upstream bug, fail while it is there, and wait on kfake's
// timers, so `make test` leaves them out.
func enabled(t *testing.T) {
	t.Helper()
	if os.Getenv("FLAKESTREAM_KFAKE_REPRO") != "1" {
		t.Skip("reproduces an upstream kfake bug and waits on its timers; set FLAKESTREAM_KFAKE_REPRO=1 to run it")
	}
}

// TestDeadJoinerIsExpired kills members (closes their connections, no
// LeaveGroup, as SIGKILL does) while their JoinGroup waits for the live
// member to rejoin, and expects what Apache Kafka does: when the join
// completes, GroupMetadataManager.completeClassicGroupJoin answers every
// member and reschedules its heartbeat expiration, whether or not the
// answer can be delivered, so the dead ones are removed one session
// timeout later and the live member gets all partitions back.
//
// kfake arms that timer in group.reply only when clientReq.reply reports
// the answer handed to the connection. For a dead connection, whose write
// loop has exited, that select has two ready cases, a free slot in the
// response buffer (cap 2) and the closed done channel, and Go picks one at
// random: each dead joiner gets its timer with probability 1/2, and one
// that does not stays in the group with its partitions.
func TestDeadJoinerIsExpired(t *testing.T) {
	enabled(t)
	ctx := t.Context()
	c := newCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	live := newClient(t, c, kgo.ClientID("live"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(sessionTimeout), kgo.HeartbeatInterval(time.Second))
	// Close the broker before the clients: a failing run leaves the live
	// member waiting in a JoinGroup for the rebalance timeout, and its
	// Close would wait for that to leave the group.
	t.Cleanup(c.Close)
	go func() {
		for ctx.Err() == nil {
			live.PollFetches(ctx)
		}
	}()
	if g, ok := waitGroup(ctx, adm, 15*time.Second, liveOwnsAll); !ok {
		t.Fatalf("setup: the live member did not get all %d partitions: %s", parts, describe(g))
	}

	// Each dead joiner gets its member ID, then sends the JoinGroup that
	// parks until the live member rejoins, and its process dies at once:
	// the broker has read the request before it sees the close.
	addr := c.ListenAddrs()[0]
	conns := make([]*rawConn, deadJoiners)
	ids := make([]string, deadJoiners)
	for i := range conns {
		conns[i], ids[i] = dialMember(t, addr, fmt.Sprintf("dead-%02d", i))
	}
	for i, conn := range conns {
		if err := conn.send(joinRequest(ids[i])); err != nil {
			t.Fatalf("setup: JoinGroup of %s: %v", ids[i], err)
		}
		conn.Close()
	}
	g, ok := waitGroup(ctx, adm, 15*time.Second, func(g kadm.DescribedGroup) bool {
		return g.State == "Stable" && len(g.Members) == deadJoiners+1
	})
	if !ok {
		t.Fatalf("setup: no generation with the live member and the %d dead joiners completed: %s", deadJoiners, describe(g))
	}
	joined := time.Now()
	t.Logf("generation with the live member and %d dead joiners completed: %s", deadJoiners, describe(g))

	g, ok = waitGroup(ctx, adm, sessionTimeout+margin, liveOwnsAll)
	if ok {
		t.Logf("every dead joiner was removed and the live member owns all %d partitions %s after the join completed", parts, time.Since(joined).Round(100*time.Millisecond))
		return
	}
	var stayed []string
	for _, m := range g.Members {
		if strings.HasPrefix(m.ClientID, "dead-") {
			stayed = append(stayed, m.ClientID)
		}
	}
	t.Fatalf("%d of %d dead joiners are still members %s after the join completed (session timeout %s; Apache Kafka removes each one session timeout after the join): %v\ngroup now: %s",
		len(stayed), deadJoiners, time.Since(joined).Round(100*time.Millisecond), sessionTimeout, stayed, describe(g))
}

// TestOneLeaderPerGeneration removes the leader (it leaves) while two
// other members wait in JoinGroup, and expects what Apache Kafka does:
// completeClassicGroupJoin elects one leader among the joined members
// (ClassicGroup.maybeElectNewJoinedLeader) before it answers, and every
// answer names that one leader.
//
// kfake's group.completeRebalance, when the old leader is not among the
// members left, sets g.leader to each member in turn inside the loop that
// answers them, so every member is told that it is the leader and gets
// the member list, and only the last one's SyncGroup is taken as the
// leader's: the others' wait for it, and if the last is dead, for the
// rebalance timeout.
func TestOneLeaderPerGeneration(t *testing.T) {
	enabled(t)
	ctx := t.Context()
	c := newCluster(t)
	adm := kadm.NewClient(newClient(t, c))
	addr := c.ListenAddrs()[0]

	// The old leader joins alone and syncs: a stable group it leads.
	old, oldID := dialMember(t, addr, "old-leader")
	joined := old.join(t, oldID)
	if joined.LeaderID != oldID {
		t.Fatalf("setup: the only member is not the leader: %s leads", joined.LeaderID)
	}
	old.sync(t, oldID, joined.Generation)

	// Two members join; the group waits for the old leader to rejoin.
	b, bID := dialMember(t, addr, "b")
	d, dID := dialMember(t, addr, "d")
	for _, m := range []struct {
		conn *rawConn
		id   string
	}{{b, bID}, {d, dID}} {
		if err := m.conn.send(joinRequest(m.id)); err != nil {
			t.Fatalf("setup: JoinGroup of %s: %v", m.id, err)
		}
	}
	if g, ok := waitGroup(ctx, adm, 10*time.Second, func(g kadm.DescribedGroup) bool {
		return g.State == "PreparingRebalance" && len(g.Members) == 3
	}); !ok {
		t.Fatalf("setup: the two joiners did not wait in JoinGroup: %s", describe(g))
	}

	// The old leader leaves instead: the join completes at once.
	old.leave(t, oldID)
	rb, rd := b.recvJoin(t), d.recvJoin(t)
	t.Logf("generation %d: %s was told the leader is %s (member list of %d); %s was told %s (member list of %d)",
		rb.Generation, bID, rb.LeaderID, len(rb.Members), dID, rd.LeaderID, len(rd.Members))
	if rb.Generation != rd.Generation || rb.LeaderID != rd.LeaderID || (rb.LeaderID != bID && rb.LeaderID != dID) {
		t.Fatalf("the two members of one generation were not told one leader, one of them (Apache Kafka elects one): %s was told %s at generation %d, %s was told %s at generation %d",
			bID, rb.LeaderID, rb.Generation, dID, rd.LeaderID, rd.Generation)
	}
}

// newCluster starts a one-broker kfake cluster with the test's topic,
// closed when the test ends (Close may be called more than once).
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newClient is a kgo client of c, closed when the test ends.
func newClient(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// liveOwnsAll is the state the group must come back to: the live member
// alone, stable, with every partition.
func liveOwnsAll(g kadm.DescribedGroup) bool {
	return g.State == "Stable" && len(g.Members) == 1 && g.Members[0].ClientID == "live" && len(owned(g.Members[0])) == parts
}

// waitGroup describes the group every 100 ms until done holds or bound
// passes, and returns the last description and whether done held.
func waitGroup(ctx context.Context, adm *kadm.Client, bound time.Duration, done func(kadm.DescribedGroup) bool) (kadm.DescribedGroup, bool) {
	deadline := time.Now().Add(bound)
	var g kadm.DescribedGroup
	for {
		ds, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			g = ds[group]
			if g.Err == nil && done(g) {
				return g, true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return g, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// describe is the group's state and each member's client ID and
// partitions, as the broker has them.
func describe(g kadm.DescribedGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %s, %d members:", g.State, len(g.Members))
	for _, m := range g.Members {
		fmt.Fprintf(&b, " %s%v", m.ClientID, owned(m))
	}
	return b.String()
}

// owned is the partitions of the test's topic assigned to m.
func owned(m kadm.DescribedGroupMember) []int32 {
	a, ok := m.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	var ps []int32
	for _, at := range a.Topics {
		if at.Topic == topic {
			ps = append(ps, at.Partitions...)
		}
	}
	slices.Sort(ps)
	return ps
}

// rawConn is one connection to the broker that sends a request and reads
// its response with kmsg, nothing else: a member whose connection the test
// can close at any moment, as the death of its process would.
type rawConn struct {
	net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

// dialMember connects as clientID and gets a member ID the way clients do
// since JoinGroup v4 (KIP-394): a join without one is answered
// MEMBER_ID_REQUIRED, with the ID to join with.
func dialMember(t *testing.T, addr, clientID string) (*rawConn, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// No exchange of this test waits longer than the join it makes.
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{Conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if err := rc.send(joinRequest("")); err != nil {
		t.Fatal(err)
	}
	resp := rc.recvJoin(t)
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("setup: first JoinGroup of %s: error %v, want MEMBER_ID_REQUIRED", clientID, kerr.ErrorForCode(resp.ErrorCode))
	}
	return rc, resp.MemberID
}

// joinRequest is a consumer's JoinGroup (range assignor, the test's topic)
// as member memberID.
func joinRequest(memberID string) *kmsg.JoinGroupRequest {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = []string{topic}
	meta.Generation = -1
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = group
	req.MemberID = memberID
	req.SessionTimeoutMillis = int32(sessionTimeout.Milliseconds())
	req.RebalanceTimeoutMillis = int32(rebalanceTimeout.Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return req
}

// join joins as memberID and waits for the join to complete.
func (c *rawConn) join(t *testing.T, memberID string) *kmsg.JoinGroupResponse {
	t.Helper()
	if err := c.send(joinRequest(memberID)); err != nil {
		t.Fatal(err)
	}
	resp := c.recvJoin(t)
	if resp.ErrorCode != 0 {
		t.Fatalf("JoinGroup of %s: %v", memberID, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// sync sends the leader's SyncGroup, every partition to itself.
func (c *rawConn) sync(t *testing.T, memberID string, generation int32) {
	t.Helper()
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0, 1, 2, 3}}}
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = group
	req.Generation = generation
	req.MemberID = memberID
	req.ProtocolType = kmsg.StringPtr("consumer")
	req.Protocol = kmsg.StringPtr("range")
	req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: memberID, MemberAssignment: a.AppendTo(nil)}}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if err := c.roundTrip(req, resp); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("SyncGroup of %s: %v %v", memberID, err, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// leave sends memberID's LeaveGroup.
func (c *rawConn) leave(t *testing.T, memberID string) {
	t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 4
	req.Group = group
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: memberID}}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if err := c.roundTrip(req, resp); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("LeaveGroup of %s: %v %v", memberID, err, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// recvJoin reads the answer to the JoinGroup sent last.
func (c *rawConn) recvJoin(t *testing.T) *kmsg.JoinGroupResponse {
	t.Helper()
	resp := joinRequest("").ResponseKind().(*kmsg.JoinGroupResponse)
	if err := c.recv(resp); err != nil {
		t.Fatalf("JoinGroup response: %v", err)
	}
	return resp
}

func (c *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	if err := c.send(req); err != nil {
		return err
	}
	return c.recv(resp)
}

func (c *rawConn) send(req kmsg.Request) error {
	c.corr++
	_, err := c.Write(c.f.AppendRequest(nil, req, c.corr))
	return err
}

// recv reads one response: its size, its correlation ID, the empty tag
// section of a flexible response header, then the body.
func (c *rawConn) recv(resp kmsg.Response) error {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != c.corr {
		return fmt.Errorf("correlation ID %d, want %d", corr, c.corr)
	}
	buf = buf[4:]
	if resp.IsFlexible() {
		buf = buf[1:]
	}
	return resp.ReadFrom(buf)
}
