package eos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// syncBuf is a log sink safe for the loop's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func textLogger(w *syncBuf) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Topics created a moment after the loop starts (an init container, a
// deploy script) are waited for: the loop copies every record instead of
// ending with ErrMissingTopic, and says once, by name, what it waits for.
func TestLoopWaitsForTopicsCreatedAfterItStarts(t *testing.T) {
	brokers := cluster(t, 2) // no topics yet
	var logs syncBuf
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", TopicWait: 20 * time.Second, Logger: textLogger(&logs)}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	waitFor(t, "the loop to wait for out", func() bool { return strings.Contains(logs.String(), "topic=out") })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 2, 1, nil, "in", "out"); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, brokers, "in", 2, 5)
	waitFor(t, "10 records copied", func() bool { return step.committed.Load() == 10 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, topic := range []string{"in", "out"} {
		if n := strings.Count(logs.String(), `msg="waiting for topic" topic=`+topic+" "); n != 1 {
			t.Errorf("%d log lines waiting for %s, want 1:\n%s", n, topic, logs.String())
		}
	}
}

// After TopicWait a missing output is still the one-line ErrMissingTopic.
func TestMissingOutputAfterTopicWaitIsErrMissingTopic(t *testing.T) {
	brokers := cluster(t, 1, "in")
	var logs syncBuf
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", TopicWait: 300 * time.Millisecond, Logger: textLogger(&logs)}, &copyStep{out: "out"}, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = l.Run(ctx)
	if !errors.Is(err, ErrMissingTopic) || err.Error() != "pipeline: topic does not exist: out" {
		t.Fatalf("Run = %v, want ErrMissingTopic for out", err)
	}
	if !strings.Contains(logs.String(), `msg="waiting for topic" topic=out reason="does not exist"`) {
		t.Errorf("no line waiting for out:\n%s", logs.String())
	}
}

func TestNotReady(t *testing.T) {
	missing := kadm.TopicDetail{Topic: "t", Err: kerr.UnknownTopicOrPartition}
	noLeader := kadm.TopicDetail{Topic: "t", Partitions: kadm.PartitionDetails{
		0: {Partition: 0, Leader: 1}, 1: {Partition: 1, Leader: -1, Err: kerr.LeaderNotAvailable}}}
	ok := kadm.TopicDetail{Topic: "t", Partitions: kadm.PartitionDetails{0: {Partition: 0, Leader: 1}}}
	denied := kadm.TopicDetail{Topic: "t", Err: kerr.TopicAuthorizationFailed}
	for _, c := range []struct {
		name    string
		details kadm.TopicDetails
		wait    bool
	}{
		{"absent", kadm.TopicDetails{}, true},
		{"unknown", kadm.TopicDetails{"t": missing}, true},
		{"leaderless partition", kadm.TopicDetails{"t": noLeader}, true},
		{"ready", kadm.TopicDetails{"t": ok}, false},
		{"not authorized: waiting cannot help", kadm.TopicDetails{"t": denied}, false},
	} {
		if got := notReady(c.details, "t") != ""; got != c.wait {
			t.Errorf("%s: wait %v, want %v", c.name, got, c.wait)
		}
	}
}

// A transaction coordinator that is not ready yet when the guard first
// runs (a fresh cluster) is start-up: the loop waits for it at INFO,
// counts no abort, logs no "batch aborted" warning and keeps the session.
func TestGuardWaitsForTheCoordinatorAtStart(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 3)
	var logs syncBuf
	var calls atomic.Int32
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i", IdleGuard: -1, BackoffMin: 10 * time.Millisecond, Logger: textLogger(&logs), BeforeProduce: func(context.Context, *kgo.Client, map[string][]int32) error {
		if calls.Add(1) <= 3 {
			// What txnguard returns when DescribeTransactions meets it.
			return fmt.Errorf("txnguard: describe transaction x: %w", kerr.CoordinatorNotAvailable)
		}
		return nil
	}, Name: "worker"}, step, Metrics{})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "every record once the coordinator is ready", func() bool { return step.committed.Load() == 3 })
	out := logs.String()
	if _, aborted := l.Counts(); aborted != 0 {
		t.Errorf("%d aborts counted, want 0", aborted)
	}
	if strings.Contains(out, "level=WARN") {
		t.Errorf("a warning while waiting for the coordinator:\n%s", out)
	}
	if n := strings.Count(out, `level=INFO msg="waiting for the transaction coordinator`); n != 1 {
		t.Errorf("%d INFO lines waiting for the coordinator, want 1:\n%s", n, out)
	}
	if calls.Load() != 4 {
		t.Errorf("guard called %d times, want 4", calls.Load())
	}
}

// Every committed transaction is split into its phases: each phase has an
// observation per committed transaction that carried records.
func TestPhasesOfACommittedTransaction(t *testing.T) {
	brokers := cluster(t, 1, "in", "out")
	produceTxn(t, brokers, "in", 1, 5)
	h := NewPhaseHistogram()
	step := &copyStep{out: "out"}
	l, err := New(Config{Brokers: brokers, Topics: []string{"in"}, Group: "g", InstanceID: "i"}, step, Metrics{Phases: h})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, l, "5 records", func() bool { return step.committed.Load() == 5 })
	committed, _ := l.Counts()
	for _, phase := range Phases {
		m := &dto.Metric{}
		if err := h.WithLabelValues(phase).(prometheus.Metric).Write(m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n < 1 || n > uint64(committed) {
			t.Errorf("phase %s: %d observations, want 1 to %d (the committed transactions)", phase, n, committed)
		}
	}
}
