package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fences counts only the fences within the window before the last one.
func TestFencesWindow(t *testing.T) {
	at := time.Unix(0, 0)
	f := &Fences{now: func() time.Time { return at }}
	for i, c := range []struct {
		after time.Duration
		want  int
	}{{0, 1}, {time.Second, 2}, {time.Second, 3}, {9 * time.Second, 2}, {20 * time.Second, 1}} {
		at = at.Add(c.after)
		if got := f.add(10 * time.Second); got != c.want {
			t.Fatalf("fence %d at %s: %d within 10s, want %d", i, at.Sub(time.Unix(0, 0)), got, c.want)
		}
	}
}

// A producer fenced again and again (as by another live process with the
// same transactional ID) ends Run once the fences reach the limit, with a
// SharedIDError that names the transactional and the instance ID; a
// single fence replaces the session instead (TestProducerFencedReplacesTheSession).
func TestRepeatedFencesEndRun(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	produceTxn(t, brokers, "in", 1, 4)
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.TxnOffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.ProducerFenced.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// The window is long, so that however slowly the sessions follow one
	// another, the fifth fence falls within it.
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i",
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, FenceWindow: time.Hour}, &copyStep{out: "out"}, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err = l.Run(ctx)
	se, ok := errors.AsType[*SharedIDError](err)
	if !ok || !errors.Is(err, ErrFatal) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("Run = %v; want a fatal SharedIDError", err)
	}
	if se.TransactionalID != "flakestream-g-i" || se.InstanceID != "i" || se.Fences != DefaultFenceLimit || se.Window != time.Hour {
		t.Fatalf("SharedIDError %+v", se)
	}
}
