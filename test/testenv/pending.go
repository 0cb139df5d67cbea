package testenv

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A lost commit marker on the group's offsets, made on purpose: what a
// transaction coordinator that restarts uncleanly leaves when it loses the
// record that the offsets partition was in a transaction (KAFKA-20734).

// PendingOffset writes offset at for topic's partition p in group's name,
// in a transaction of producer pid at epoch of transactional ID txnID that
// the coordinator never hears of (TxnOffsetCommit without
// AddOffsetsToTxn). cl must speak Kafka 3.8's protocol at most
// (kgo.MaxVersions(kversion.V3_8_0())): a broker takes such a request
// without asking the coordinator. The offset stays pending, and every
// fetch of the group's offsets that requires them stable answers
// UNSTABLE_OFFSET_COMMIT, until a marker of pid ends it.
func PendingOffset(ctx context.Context, cl *kgo.Client, txnID, group string, pid int64, epoch int16, topic string, p int32, at int64) error {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txnID, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p, at, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("testenv: the pending offset of %s[%d] in group %s: %w", topic, p, group, err)
	}
	return nil
}

// OffsetUnstable says why group's offset of topic's partition p cannot be
// read as stable (a fetch that requires it stable fails), or "" when it
// can.
func OffsetUnstable(ctx context.Context, cl *kgo.Client, group, topic string, p int32) string {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{p}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err.Error()
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err.Error()
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return err.Error()
		}
		for _, tt := range g.Topics {
			for _, p := range tt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err.Error()
				}
			}
		}
	}
	return ""
}

// TxnVerification turns the brokers' transaction.partition.verification.enable
// off, or back to its default (on): with it on, a broker asks the
// coordinator before it takes a TxnOffsetCommit, and PendingOffset cannot
// make its offset.
func TxnVerification(ctx context.Context, adm *kadm.Client, on bool) error {
	c := kadm.AlterConfig{Name: "transaction.partition.verification.enable", Value: kadm.StringPtr("false")}
	if on {
		c = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Name}
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{c})
	for _, r := range rs {
		if err == nil && r.Err != nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("testenv: transaction.partition.verification.enable on=%v: %w", on, err)
	}
	return nil
}
