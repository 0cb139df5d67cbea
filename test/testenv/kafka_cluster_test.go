package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A 3-node cluster: topics get replication factor 3 and min ISR 2, the
// coordinators and leaders are found, a transaction commits while one node
// is killed, and the node comes back on its address with its replicas in
// sync.
func TestRealKafkaCluster(t *testing.T) {
	c := RealKafkaCluster(t, 3)
	if c.Nodes() != 3 || len(c.Addrs) != 3 {
		t.Fatalf("nodes %d, addrs %v", c.Nodes(), c.Addrs)
	}
	topic := c.NewTopic(t, 3)
	adm := c.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics[topic].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d: replicas %v, want 3", p.Partition, p.Replicas)
		}
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cfgs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range cfg.Configs {
		if kv.Key == "min.insync.replicas" && (kv.Value == nil || *kv.Value != "2") {
			t.Errorf("min.insync.replicas %v, want 2", kv.MaybeValue())
		}
	}

	txnID := KafkaTopicName(t)
	cl := c.Client(t, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	kafkaProduceTxn(t, cl, topic, "before", 30, true)
	coord := c.TxnCoordinator(t, txnID)
	leaders := c.Leaders(t, topic)
	group := c.GroupCoordinator(t, txnID+"-g")
	t.Logf("transaction coordinator %d, group coordinator %d, leaders %v", coord, group, leaders)
	if coord < 1 || coord > 3 || group < 1 || group > 3 || len(leaders) != 3 {
		t.Fatalf("coordinator %d, group coordinator %d, leaders %v", coord, group, leaders)
	}

	c.KillNode(t, coord)
	kafkaProduceTxn(t, cl, topic, "during", 30, true) // ISR 2 of 3 meets min ISR 2
	if now := c.TxnCoordinator(t, txnID); now == coord {
		t.Errorf("node %d was killed but still coordinates %s", coord, txnID)
	}
	c.StartNode(t, coord)
	took := c.WaitInSync(t, 2*time.Minute)
	t.Logf("node %d back in sync after %s", coord, took)
	byPrefix, _ := kafkaReadCommitted(t, c, topic, 60)
	if byPrefix["before"] != 30 || byPrefix["during"] != 30 {
		t.Fatalf("read committed %v, want 30 before and 30 during", byPrefix)
	}
	c.StopNode(t, 2)
	c.StartNode(t, 2)
}
