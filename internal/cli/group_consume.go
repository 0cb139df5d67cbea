package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/eos/txnguard"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
)

// The consume group: the topics, the consumer group, the transactional
// identity and the bounds of the exactly-once loop, shared by run, audit,
// replay and bench. Each command picks the flags it needs by name.
const (
	flagInputTopic         = "input-topic"
	flagOutputTopic        = "output-topic"
	flagDLQTopic           = "dlq-topic"
	flagGroup              = "group"
	flagInstanceID         = "instance-id"
	flagTransactionalID    = "transactional-id"
	flagStartOffset        = "start-offset"
	flagCreateTopics       = "create-topics"
	flagMaxPollRecords     = "max-poll-records"
	flagMaxBufferedRecords = "max-buffered-records"
	flagFetchMaxBytes      = "fetch-max-bytes"
	flagMaxProduceBytes    = "max-produce-bytes"
	flagLinger             = "linger"
	flagTxnTimeout         = "txn-timeout"
	flagSessionTimeout     = "session-timeout"
	flagStaticMembership   = "static-membership"
	flagShutdownTimeout    = "shutdown-timeout"
	flagOrphanGuard        = "orphan-guard"
	flagTopicWait          = "topic-wait"
	flagTopUpWait          = "top-up-wait"
	flagLanes              = "lanes"
)

type consumeConfig struct {
	// defaultGroup is the default of --group: the worker's and the
	// auditor's groups differ, so that both can read one topic.
	defaultGroup string

	inputTopics      cli.StringSlice // run and audit: several topics
	inputTopic       string          // replay: one topic
	outputTopic      string
	dlqTopic         string
	group            string
	instanceID       string
	transactionalID  string
	startOffset      string
	createTopics     bool
	maxPollRecords   int
	maxBuffered      int
	fetchMaxBytes    int
	maxProduceBytes  int
	linger           time.Duration
	txnTimeout       time.Duration
	sessionTimeout   time.Duration
	staticMembership bool
	shutdownTimeout  time.Duration
	orphanGuard      bool
	topicWait        time.Duration
	topUpWait        time.Duration
	lanes            int

	// defined holds the flags the command has, so that settings leaves a
	// setting the command has no flag for at the loop's default.
	defined map[string]bool
}

// flags returns the flags of names, in that order. A name outside the
// group is a programming error.
func (cc *consumeConfig) flags(names ...string) []cli.Flag {
	out := make([]cli.Flag, 0, len(names))
	for _, n := range names {
		out = append(out, cc.flag(n))
	}
	return out
}

func (cc *consumeConfig) flag(name string) cli.Flag {
	if cc.defined == nil {
		cc.defined = map[string]bool{}
	}
	cc.defined[name] = true
	switch name {
	case flagInputTopic:
		return stringSliceFlag(name, &cc.inputTopics, nil, "topic to read: order events (run) or numbered events (audit); repeat for several; required")
	case flagOutputTopic:
		return stringFlag(name, &cc.outputTopic, "", "topic the numbered events go to (required)")
	case flagDLQTopic:
		return stringFlag(name, &cc.dlqTopic, "", "dead-letter topic (default: run \"<first input topic>.dlq\", replay \"<output topic>.dlq\")")
	case flagGroup:
		return stringFlag(name, &cc.group, cc.defaultGroup, "consumer group (a new group starts at --start-offset, the audit's at the earliest offset)")
	case flagInstanceID:
		return stringFlag(name, &cc.instanceID, eos.DefaultInstanceID(), "this instance's stable name (default: the host name, unique per pod); the transactional ID is flakestream-<group>-<instance-id>")
	case flagTransactionalID:
		return stringFlag(name, &cc.transactionalID, "", "transactional ID, overriding the one derived from --instance-id")
	case flagStartOffset:
		return stringFlag(name, &cc.startOffset, string(pipeline.DefaultStartOffset), "where a group with no committed offsets starts: earliest (no order skipped) or latest")
	case flagCreateTopics:
		return boolFlag(name, &cc.createTopics, "create a missing output, DLQ or audit topic with the input's partition count instead of refusing to start")
	case flagMaxPollRecords:
		return intFlag(name, &cc.maxPollRecords, eos.DefaultMaxPollRecords, "records per transaction at most")
	case flagMaxBufferedRecords:
		return intFlag(name, &cc.maxBuffered, pipeline.DefaultMaxBufferedRecords, "records buffered for producing at most")
	case flagFetchMaxBytes:
		return intFlag(name, &cc.fetchMaxBytes, pipeline.DefaultFetchMaxBytes, "bytes per fetch response at most")
	case flagMaxProduceBytes:
		return intFlag(name, &cc.maxProduceBytes, 0, "cap on each record batch produced (default 0: each topic's max.message.bytes, learnt at start; where that is not readable, 1000012); an output over its topic's limit goes to the DLQ as output_too_large, a dead letter over the DLQ's as a reference record")
	case flagLinger:
		return durationFlag(name, &cc.linger, 0, "producer linger (each transaction flushes at its end anyway)")
	case flagTxnTimeout:
		return durationFlag(name, &cc.txnTimeout, eos.DefaultTransactionTimeout, "transaction timeout: how long readers wait behind an instance that died mid-transaction and never came back")
	case flagSessionTimeout:
		return durationFlag(name, &cc.sessionTimeout, eos.DefaultSessionTimeout, "group session timeout: how long the group waits for a dead member before handing its partitions on")
	case flagStaticMembership:
		return boolFlag(name, &cc.staticMembership, "join as static member --instance-id (KIP-345): a restart under the same ID takes its partitions back without a rebalance; a member gone for good is removed only after --session-timeout")
	case flagShutdownTimeout:
		return durationFlag(name, &cc.shutdownTimeout, eos.DefaultShutdownTimeout, "bound on finishing the open transaction and leaving the group after a signal")
	case flagTopicWait:
		return topicWaitFlag(&cc.topicWait)
	case flagTopUpWait:
		return topUpWaitFlag(&cc.topUpWait)
	case flagLanes:
		return intFlag(name, &cc.lanes, pipeline.DefaultLanes, "transactional sessions in this process, each its own group member (instance <instance-id>-<lane>, transactional ID suffixed -<lane>) numbering from one sequencer: while one commits, the others poll and number (1: the plain worker, IDs unsuffixed)")
	case flagOrphanGuard:
		return boolFlagValue(name, &cc.orphanGuard, true, "before the first poll of every Kafka session and before producing after a transaction that did not commit, end whatever transaction this producer ID left open on the output, the DLQ and the group's offsets, with the marker its transaction was given: one cleanup transaction of the producer's own transactional ID that writes no record (needs no right beyond the worker's own; see docs/security.md)")
	}
	panic(fmt.Sprintf("cli: %q is not a flag of the consume group", name))
}

// topicWaitFlag is --topic-wait, of every command that runs the
// exactly-once loop (run, audit, replay, bench).
func topicWaitFlag(dst *time.Duration) cli.Flag {
	return durationFlag(flagTopicWait, dst, eos.DefaultTopicWait, "at start, wait this long for an input, output or DLQ topic that does not exist yet or has a partition without a leader yet (topics created just before the workers start), logging each one; then a missing output or DLQ is an error (0: no wait)")
}

// topUpWaitFlag is --top-up-wait, of run and bench.
func topUpWaitFlag(dst *time.Duration) cli.Flag {
	return durationFlag(flagTopUpWait, dst, pipeline.DefaultTopUpWait, "after a poll that returned fewer than --max-poll-records records, wait up to this long for one more fetch and number its records in the same transaction: at a low input rate, what arrived during the last transaction is committed one transaction sooner (0: off)")
}

// settings are the loop's settings, from the consume and kafka groups: the
// one place the CLI builds them, for run, audit, replay, bench and verify.
// topics are the topics consumed; log and reg (nil: none) are the
// product's logger and metrics. A setting the command has no flag for is
// left at the loop's default.
func (cc *consumeConfig) settings(k *kafkaConfig, topics []string, log *slog.Logger, reg prometheus.Registerer) (eos.Config, error) {
	kopts, err := k.opts()
	if err != nil {
		return eos.Config{}, err
	}
	guard, err := cc.orphanGuardHook(log, reg)
	if err != nil {
		return eos.Config{}, err
	}
	s := eos.Config{
		Brokers: k.brokers.Value(), Topics: topics, Group: cc.group, InstanceID: cc.instanceID, TransactionalID: cc.transactionalID,
		MaxPollRecords: cc.maxPollRecords, TransactionTimeout: cc.txnTimeout, SessionTimeout: cc.sessionTimeout,
		ShutdownTimeout: cc.shutdownTimeout, Logger: log, Registerer: reg, KafkaOpts: kopts, BeforeProduce: guard,
	}
	if cc.defined[flagTopicWait] {
		s.TopicWait = eos.NoWait(cc.topicWait) // --topic-wait 0: no wait
	}
	return s, nil
}

// orphanGuardHook returns the orphaned-transaction guard's hook for the
// exactly-once loop (eos.Config.BeforeProduce), or nil
// when --orphan-guard is off. The guard logs to log and registers its
// counter on reg (nil: none); each check is bounded, since a broker may be
// down, and the loop retries a failed one.
func (cc *consumeConfig) orphanGuardHook(log *slog.Logger, reg prometheus.Registerer) (func(context.Context, *kgo.Client, map[string][]int32) error, error) {
	if !cc.orphanGuard {
		return nil, nil
	}
	g, err := txnguard.New(log, reg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cl *kgo.Client, parts map[string][]int32) error {
		ctx, cancel := context.WithTimeout(ctx, orphanGuardTimeout)
		defer cancel()
		_, err := g.Check(ctx, cl, parts)
		return err
	}, nil
}

// orphanGuardTimeout bounds one check of the orphaned-transaction guard.
const orphanGuardTimeout = 30 * time.Second

// replayInputTopicFlag is replay's --input-topic: one topic, a string in
// the environment and the YAML file (run's and audit's is a list).
func replayInputTopicFlag(dst *string) cli.Flag {
	return stringFlag(flagInputTopic, dst, "", "topic to replay (required)")
}

// flagPartitions is the partition count of the topics demo and bench
// create on their embedded Kafka.
const flagPartitions = "partitions"

const defaultPartitions = 4

func partitionsFlag(dst *int, usage string) cli.Flag {
	return intFlag(flagPartitions, dst, defaultPartitions, usage)
}
