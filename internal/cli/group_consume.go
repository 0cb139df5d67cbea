package cli

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
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
	lanes            string

	// hasTopicWait: the command has --topic-wait (verify has not), so
	// settings passes it on; otherwise the loop keeps its default.
	hasTopicWait bool
}

// The consume group's flags come in named sets, one per part of a
// command's job; each command composes the sets it needs.

// inputTopicsFlag is --input-topic as a list (run, audit, verify; replay's
// is one topic, replayInputTopicFlag).
func (cc *consumeConfig) inputTopicsFlag() []cli.Flag {
	return []cli.Flag{stringSliceFlag(flagInputTopic, &cc.inputTopics, nil, "topic to read: order events (run) or numbered events (audit); repeat for several; required")}
}

// outputFlags are the topics a numbering command writes to (run, replay)
// or verify reads back.
func (cc *consumeConfig) outputFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagOutputTopic, &cc.outputTopic, "", "topic the numbered events go to (required)"),
		stringFlag(flagDLQTopic, &cc.dlqTopic, "", "dead-letter topic (default: run \"<first input topic>.dlq\", replay \"<output topic>.dlq\")"),
	}
}

// memberFlags name the group member and its transactional identity (run,
// audit).
func (cc *consumeConfig) memberFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagGroup, &cc.group, cc.defaultGroup, "consumer group (a new group starts at --start-offset, the audit's at the earliest offset)"),
		stringFlag(flagInstanceID, &cc.instanceID, eos.DefaultInstanceID(), "this instance's stable name (default: the host name, unique per pod); the transactional ID is flakestream-<group>-<instance-id>"),
		stringFlag(flagTransactionalID, &cc.transactionalID, "", "transactional ID, overriding the one derived from --instance-id"),
	}
}

// workerTuningFlags are the worker's own: where a new group starts, the
// fetch and produce bounds, static membership, the top-up poll and lanes
// (run).
func (cc *consumeConfig) workerTuningFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagStartOffset, &cc.startOffset, string(pipeline.DefaultStartOffset), "where a group with no committed offsets starts: earliest (no order skipped) or latest"),
		intFlag(flagMaxBufferedRecords, &cc.maxBuffered, pipeline.DefaultMaxBufferedRecords, "records buffered for producing at most"),
		intFlag(flagFetchMaxBytes, &cc.fetchMaxBytes, pipeline.DefaultFetchMaxBytes, "bytes per fetch response at most"),
		intFlag(flagMaxProduceBytes, &cc.maxProduceBytes, 0, "cap on each record batch produced (default 0: each topic's max.message.bytes, learnt at start; where that is not readable, 1000012); an output over its topic's limit goes to the DLQ as output_too_large, a dead letter over the DLQ's as a reference record"),
		durationFlag(flagLinger, &cc.linger, 0, "producer linger (each transaction flushes at its end anyway)"),
		boolFlag(flagStaticMembership, &cc.staticMembership, "join as static member --instance-id (KIP-345): a restart under the same ID takes its partitions back without a rebalance; a member gone for good is removed only after --session-timeout"),
		topUpWaitFlag(&cc.topUpWait),
		lanesFlag(&cc.lanes, "transactional sessions in this process, each its own group member numbering from one sequencer: while one commits, the others poll and number. Lane 0 has the plain worker's IDs, lane i>0 instance <instance-id>-<i> and transactional ID suffixed -<i>. auto: one per core (GOMAXPROCS), at most the input partitions and "+strconv.Itoa(pipeline.MaxAutoLanes)+"; or a number"),
	}
}

// loopFlags bound the exactly-once loop of a command that runs one (run,
// audit, replay); withSession adds the group session and shutdown bounds
// of a long-running member (run, audit).
func (cc *consumeConfig) loopFlags(withSession bool) []cli.Flag {
	fs := []cli.Flag{
		boolFlag(flagCreateTopics, &cc.createTopics, "create a missing output, DLQ or audit topic with the input's partition count instead of refusing to start"),
		cc.maxPollRecordsFlag(),
		durationFlag(flagTxnTimeout, &cc.txnTimeout, eos.DefaultTransactionTimeout, "transaction timeout: how long readers wait behind an instance that died mid-transaction and never came back"),
	}
	if withSession {
		fs = append(fs,
			durationFlag(flagSessionTimeout, &cc.sessionTimeout, eos.DefaultSessionTimeout, "group session timeout: how long the group waits for a dead member before handing its partitions on"),
			durationFlag(flagShutdownTimeout, &cc.shutdownTimeout, eos.DefaultShutdownTimeout, "bound on finishing the open transaction and leaving the group after a signal"))
	}
	return append(fs,
		boolFlagValue(flagOrphanGuard, &cc.orphanGuard, true, "before the first poll of every Kafka session and before producing after a transaction that did not commit, end whatever transaction this producer ID left open on the output, the DLQ and the group's offsets, with the marker its transaction was given: one cleanup transaction of the producer's own transactional ID that writes no record (needs no right beyond the worker's own; see docs/security.md)"),
		cc.topicWaitFlag())
}

// maxPollRecordsFlag is --max-poll-records (the loop's commands and bench).
func (cc *consumeConfig) maxPollRecordsFlag() cli.Flag {
	return intFlag(flagMaxPollRecords, &cc.maxPollRecords, eos.DefaultMaxPollRecords, "records per transaction at most")
}

// topicWaitFlag is --topic-wait of the group (the loop's commands and
// bench); settings passes it on only where the command has it.
func (cc *consumeConfig) topicWaitFlag() cli.Flag {
	cc.hasTopicWait = true
	return topicWaitFlag(&cc.topicWait)
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
		Principal: k.principal(),
	}
	if cc.hasTopicWait {
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

// lanesAuto is the value of --lanes that picks the count (pipeline.AutoLanes).
const lanesAuto = "auto"

// lanesFlag is --lanes (run and bench): a number of lanes or auto.
func lanesFlag(dst *string, usage string) cli.Flag {
	return stringFlag(flagLanes, dst, lanesAuto, usage)
}

// parseLanes reads --lanes: a count of at least 1, or 0 for auto.
func parseLanes(v string) (int, error) {
	if v == lanesAuto {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, usageErr("--%s %q: want auto or a number of at least 1", flagLanes, v)
	}
	return n, nil
}

// lanesPartitionsTimeout bounds the look-up of the input partitions that
// --lanes auto makes at start.
const lanesPartitionsTimeout = 15 * time.Second

// laneCount resolves --lanes for the worker s describes: a number as it
// is, auto from GOMAXPROCS and the input topics' partitions (asked of the
// brokers; when they cannot be read, from GOMAXPROCS alone, with a
// warning). It logs the choice.
func (cc *consumeConfig) laneCount(ctx context.Context, s eos.Config, log *slog.Logger) (int, error) {
	n, err := parseLanes(cc.lanes)
	if err != nil || n > 0 {
		return n, err
	}
	procs := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithTimeout(ctx, lanesPartitionsTimeout)
	defer cancel()
	parts, err := pipeline.InputPartitions(ctx, s)
	if err != nil {
		log.Warn(fmt.Sprintf("--%s auto: cannot read the input partitions; lanes from GOMAXPROCS alone", flagLanes), "err", err)
		parts = 0
	}
	n = pipeline.AutoLanes(procs, parts)
	log.Info(fmt.Sprintf("--%s auto", flagLanes), "lanes", n, "gomaxprocs", procs, "input_partitions", parts, "cap", pipeline.MaxAutoLanes)
	return n, nil
}

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
