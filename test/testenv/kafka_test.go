package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaProduceTxn produces n records to topic in one transaction and commits
// it (commit=true) or aborts it. Values are prefix-i; keys spread the records
// over the partitions.
func kafkaProduceTxn(t *testing.T, cl *kgo.Client, topic, prefix string, n int, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin transaction: %v", err)
	}
	errs := make(chan error, n)
	for i := range n {
		r := &kgo.Record{
			Topic: topic,
			Key:   []byte(fmt.Sprintf("key-%d", i)),
			Value: []byte(fmt.Sprintf("%s-%d", prefix, i)),
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				errs <- err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Fatalf("produce: %v", err)
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// kafkaReadCommitted reads topic from the start with read_committed until it
// has want records, and returns the count per value prefix and per partition.
func kafkaReadCommitted(t *testing.T, c *KafkaCluster, topic string, want int) (map[string]int, map[int32]int) {
	t.Helper()
	cl := c.Client(t,
		kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byPrefix, byPartition := map[string]int{}, map[int32]int{}
	seen := map[string]bool{}
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records from %s (%s) before the timeout", got, want, topic, c.Kind)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("duplicate record %q", v)
			}
			seen[v] = true
			prefix, _, _ := strings.Cut(v, "-")
			byPrefix[prefix]++
			byPartition[r.Partition]++
			got++
		})
	}
	return byPrefix, byPartition
}

func kafkaTxnProducer(t *testing.T, c *KafkaCluster) *kgo.Client {
	return c.Client(t,
		kgo.TransactionalID("testenv-"+KafkaTopicName(t)),
		kgo.TransactionTimeout(30*time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
}

// An aborted transaction of 100 records, then a committed one of 1000, on a
// topic of 3 partitions: a read_committed reader sees the 1000 and only them.
func testKafkaTransactionalRoundTrip(t *testing.T, c *KafkaCluster) {
	t.Logf("kafka: %s at %v", c.Kind, c.Addrs)
	topic := KafkaTopicName(t)
	c.CreateTopic(t, topic, 3)
	prod := kafkaTxnProducer(t, c)

	start := time.Now()
	kafkaProduceTxn(t, prod, topic, "aborted", 100, false)
	kafkaProduceTxn(t, prod, topic, "committed", 1000, true)
	t.Logf("produced 100 aborted + 1000 committed in %v", time.Since(start))

	byPrefix, byPartition := kafkaReadCommitted(t, c, topic, 1000)
	if byPrefix["committed"] != 1000 || byPrefix["aborted"] != 0 {
		t.Fatalf("read_committed saw %v, want 1000 committed and no aborted", byPrefix)
	}
	if len(byPartition) != 3 {
		t.Errorf("records landed on partitions %v, want all 3", byPartition)
	}
	t.Logf("read 1000 committed records back (per partition %v) in %v", byPartition, time.Since(start))
}

func TestKafkaTransactionalRoundTrip(t *testing.T) {
	testKafkaTransactionalRoundTrip(t, Kafka(t))
}

func TestRealKafkaTransactionalRoundTrip(t *testing.T) {
	testKafkaTransactionalRoundTrip(t, RealKafka(t))
}

// Records committed before a restart (kill=false: clean stop; kill=true:
// SIGKILL of the broker) survive it; the same client commits again after
// it, on the same address.
func testKafkaRestart(t *testing.T, c *KafkaCluster, kill bool) {
	t.Logf("kafka: %s at %v", c.Kind, c.Addrs)
	topic := KafkaTopicName(t)
	c.CreateTopic(t, topic, 3)
	prod := kafkaTxnProducer(t, c)
	kafkaProduceTxn(t, prod, topic, "before", 50, true)

	addrs := append([]string(nil), c.Addrs...)
	start := time.Now()
	if kill {
		c.Kill(t)
		c.Start(t)
	} else {
		c.Restart(t)
	}
	t.Logf("restarted (kill=%v) in %v", kill, time.Since(start))
	if fmt.Sprint(addrs) != fmt.Sprint(c.Addrs) {
		t.Fatalf("addresses changed over the restart: %v -> %v", addrs, c.Addrs)
	}

	kafkaProduceTxn(t, prod, topic, "after", 50, true)
	byPrefix, _ := kafkaReadCommitted(t, c, topic, 100)
	if byPrefix["before"] != 50 || byPrefix["after"] != 50 {
		t.Fatalf("after the restart read %v, want 50 before and 50 after", byPrefix)
	}
}

func TestKafkaRestart(t *testing.T) {
	testKafkaRestart(t, Kafka(t, KafkaRestartable()), false)
}

func TestRealKafkaRestart(t *testing.T) {
	testKafkaRestart(t, RealKafka(t, KafkaRestartable()), false)
}

func TestRealKafkaKilledAndStarted(t *testing.T) {
	testKafkaRestart(t, RealKafka(t, KafkaRestartable()), true)
}
