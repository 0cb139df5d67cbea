package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/pipeline/audit"
	"github.com/urfave/cli/v2"
)

func auditFlags() []cli.Flag {
	host, _ := os.Hostname()
	return []cli.Flag{
		stringSliceFlag("input-topic", nil, "numbered topic to audit (repeat for several; required)"),
		stringFlag("audit-topic", "", "topic the audit records go to, exactly once (default \"<first input topic>.audit\"; \"\" turns it off)"),
		boolFlag("stdout", "also write every audit record to standard output as a JSON line"),
		stringFlag("group", audit.DefaultGroup, "consumer group (a new group starts at the earliest offset)"),
		stringFlag("instance-id", host, "this instance's stable name (default: the host name); the transactional ID is flakestream-<group>-<instance-id>"),
		stringFlag("transactional-id", "", "transactional ID, overriding the one derived from --instance-id"),
		stringFlag("number-field", codec.DefaultField, "JSON field read when a record has no flakestream-number header"),
		durationFlag("dup-window", audit.DefaultDupWindow, "a number seen again within this much number time is flagged duplicate"),
		intFlag("dup-max-entries", audit.DefaultDupMaxEntries, "numbers the duplicate window holds at most (about 6.4 to 10.7 bytes each); past it the oldest are dropped and the window is shorter"),
		durationFlag("max-skew", audit.DefaultMaxSkew, "a number more than this ahead of the clock is flagged future"),
		durationFlag("max-lag", audit.DefaultMaxLag, "a record whose timestamp is further than this from its number's time is flagged lag (0 turns the check off)"),
		stringFlag("allowed-servers", "", "server IDs expected, comma-separated, ranges too (\"1,2,5-7\"); any other is flagged unknown_server (default: any)"),
		stringFlag("allowed-workers", "", "worker IDs expected, comma-separated, ranges too (\"1,2,5-7\"); any other is flagged unknown_worker (default: any)"),
		durationFlag("catch-up-timeout", time.Minute, "bound on reading back the last dup window of a partition this instance is given, so a restart or rebalance forgets nothing (0 turns the catch-up off)"),
		boolFlag("create-topics", "create a missing audit topic with the input's partition count instead of refusing to start"),
		intFlag("max-poll-records", 10000, "records per transaction at most"),
		durationFlag("txn-timeout", 10*time.Second, "transaction timeout"),
		durationFlag("session-timeout", 10*time.Second, "group session timeout"),
		durationFlag("shutdown-timeout", 15*time.Second, "bound on finishing the open transaction and leaving the group after a signal"),
	}
}

func auditCommand() *cli.Command {
	return configured(&cli.Command{
		Name:  "audit",
		Usage: "decode every number of the numbered topic into an audit record, flag anomalies, and show them live",
		Flags: concat(auditFlags(), layoutFlags(), kafkaFlags(), opsFlags(":9465")),
		Action: func(c *cli.Context) error {
			log, err := loggerFrom(c)
			if err != nil {
				return err
			}
			reg := newRegistry()
			opts, err := auditOptsFrom(c)
			if err != nil {
				return err
			}
			opts = append(opts, audit.Logger(log), audit.Registerer(reg))
			a, err := audit.New(opts...)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if addr := c.String("http-addr"); addr != "" {
				bound, err := pipeline.Serve(c.Context, addr, reg, a.Ready, a.Handlers(), log)
				if err != nil {
					return fmt.Errorf("--http-addr %s: %w", addr, err)
				}
				log.Info("serving the live page at / and /metrics, /healthz, /readyz", "addr", bound.String())
			}
			return a.Run(c.Context)
		},
	})
}

// auditOptsFrom turns the audit flags into pipeline options.
func auditOptsFrom(c *cli.Context) ([]audit.Opt, error) {
	inputs := c.StringSlice("input-topic")
	if len(inputs) == 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--input-topic is required")}
	}
	l, err := layoutFrom(c)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	kopts, err := kafkaOptsFrom(c)
	if err != nil {
		return nil, err
	}
	// The default is derived, so "" (set on purpose) can mean off.
	topic := inputs[0] + ".audit"
	if c.IsSet("audit-topic") {
		topic = c.String("audit-topic")
	}
	opts := []audit.Opt{
		audit.Brokers(c.StringSlice("brokers")...),
		audit.InputTopics(inputs...),
		audit.Topic(topic),
		audit.Group(c.String("group")),
		audit.InstanceID(c.String("instance-id")),
		audit.Layout(l),
		audit.NumberField(c.String("number-field")),
		audit.DupWindow(c.Duration("dup-window")),
		audit.DupMaxEntries(c.Int("dup-max-entries")),
		audit.MaxSkew(c.Duration("max-skew")),
		audit.MaxLag(c.Duration("max-lag")),
		audit.CatchUp(c.Duration("catch-up-timeout") > 0, c.Duration("catch-up-timeout")),
		audit.MaxPollRecords(c.Int("max-poll-records")),
		audit.TransactionTimeout(c.Duration("txn-timeout")),
		audit.SessionTimeout(c.Duration("session-timeout")),
		audit.ShutdownTimeout(c.Duration("shutdown-timeout")),
		audit.KafkaOpts(kopts...),
	}
	for _, f := range []struct {
		name string
		opt  func(...int64) audit.Opt
	}{{"allowed-servers", audit.AllowedServers}, {"allowed-workers", audit.AllowedWorkers}} {
		if strings.TrimSpace(c.String(f.name)) == "" {
			continue // unset or empty: any ID is allowed
		}
		ids, err := parseIDList(c.String(f.name))
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--%s: %w", f.name, err)}
		}
		opts = append(opts, f.opt(ids...))
	}
	if c.Bool("stdout") {
		opts = append(opts, audit.Stdout(c.App.Writer))
	}
	if id := c.String("transactional-id"); id != "" {
		opts = append(opts, audit.TransactionalID(id))
	}
	if c.Bool("create-topics") {
		opts = append(opts, audit.CreateTopic())
	}
	return opts, nil
}

// parseIDList parses IDs such as "1,2,5-7" into their list. An empty item
// is an error: a stray comma should not quietly shorten the list.
func parseIDList(list string) ([]int64, error) {
	var ids []int64
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.ParseInt(hi, 10, 64)
		}
		// A range wider than any layout's field is a typo, not a list.
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 1<<20 {
			return nil, fmt.Errorf("%q: want comma-separated non-negative IDs or ranges, such as 1,2,5-7", item)
		}
		for id := a; id <= b; id++ {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
