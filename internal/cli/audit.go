package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/pipeline"

	"github.com/urfave/cli/v2"
)

// The audit's own flags.
const (
	flagAuditTopic     = "audit-topic"
	flagStdout         = "stdout"
	flagDupWindow      = "dup-window"
	flagDupMaxEntries  = "dup-max-entries"
	flagMaxSkew        = "max-skew"
	flagMaxLag         = "max-lag"
	flagAllowedServers = "allowed-servers"
	flagAllowedWorkers = "allowed-workers"
	flagCatchUpTimeout = "catch-up-timeout"
	flagKey            = "key"
)

// auditConfig is what `flakestream audit` reads from its flags.
type auditConfig struct {
	consume        consumeConfig
	layout         layoutConfig
	kafka          kafkaConfig
	schema         schemaConfig
	ops            opsConfig
	auditTopic     string
	stdout         bool
	numberField    string
	dupWindow      time.Duration
	dupMaxEntries  int
	maxSkew        time.Duration
	maxLag         time.Duration
	allowedServers string
	allowedWorkers string
	catchUpTimeout time.Duration
	key            string
}

func auditCommand() *cli.Command { return newAuditConfig().command() }

func newAuditConfig() *auditConfig {
	return &auditConfig{consume: consumeConfig{defaultGroup: audit.DefaultGroup}}
}

// command is the audit command, its flags bound into cfg.
func (cfg *auditConfig) command() *cli.Command {
	return configured(&cli.Command{
		Name:  "audit",
		Usage: "decode every number of the numbered topic into an audit record, flag anomalies, and show them live",
		Flags: concat(
			cfg.consume.inputTopicsFlag(),
			[]cli.Flag{
				stringFlag(flagAuditTopic, &cfg.auditTopic, "", "topic the audit records go to, exactly once (default \"<first input topic>.audit\"; \"\" turns it off)"),
				boolFlag(flagStdout, &cfg.stdout, "also write every audit record to standard output as a JSON line"),
			},
			cfg.consume.memberFlags(),
			[]cli.Flag{
				numberFieldFlag(&cfg.numberField),
				durationFlag(flagDupWindow, &cfg.dupWindow, audit.DefaultDupWindow, "a number seen again within this much number time is flagged duplicate, and an order seen again with another number renumbered"),
				intFlag(flagDupMaxEntries, &cfg.dupMaxEntries, audit.DefaultDupMaxEntries, "numbers the duplicate window holds at most (about 6.4 to 10.7 bytes each), and orders the renumbered check holds (about 76 to 92 bytes each); past it the oldest are dropped and the window is shorter"),
				durationFlag(flagMaxSkew, &cfg.maxSkew, audit.DefaultMaxSkew, "a number more than this ahead of the clock is flagged future"),
				durationFlag(flagMaxLag, &cfg.maxLag, audit.DefaultMaxLag, "a record whose timestamp is further than this from its number's time is flagged lag (0 turns the check off)"),
				stringFlag(flagAllowedServers, &cfg.allowedServers, "", "server IDs expected, comma-separated, ranges too (\"1,2,5-7\"); any other is flagged unknown_server (default: any)"),
				stringFlag(flagAllowedWorkers, &cfg.allowedWorkers, "", "worker IDs expected, comma-separated, ranges too (\"1,2,5-7\"); any other is flagged unknown_worker (default: any)"),
				stringFlag(flagKey, &cfg.key, "", "also flag renumbered an order key seen again with another number, read as --idempotency-key reads it: key, field:<name> or header:<name> (default: by the flakestream-source header only)"),
				durationFlag(flagCatchUpTimeout, &cfg.catchUpTimeout, audit.DefaultCatchUpTimeout, "bound on reading back the last dup window of a partition this instance is given, so a restart or rebalance forgets nothing (0 turns the catch-up off)"),
			},
			cfg.consume.loopFlags(true),
			cfg.layout.flags(), cfg.schema.flags(), cfg.kafka.flags(), cfg.ops.flags(defaultAuditHTTPAddr, legacyAuditPprofAddr)),
		Action: cfg.run,
	})
}

func (cfg *auditConfig) run(c *cli.Context) error {
	log, err := cfg.ops.start(c.App.ErrWriter)
	if err != nil {
		return err
	}
	reg := newRegistry()
	opts, err := cfg.auditOptions(c)
	if err != nil {
		return err
	}
	st, err := cfg.consume.settings(&cfg.kafka, cfg.consume.inputTopics.Value(), log, reg)
	if err != nil {
		return err
	}
	a, err := audit.New(st, opts...)
	if err != nil {
		return asUsage(err)
	}
	if err := cfg.ops.serve(c.Context, reg, a.Ready, a.Handlers(), log, "the live page at / and /metrics, /healthz, /readyz"); err != nil {
		return err
	}
	if err := cfg.kafka.reach(c.Context, log); err != nil {
		return err
	}
	return a.Run(c.Context)
}

// auditOptions turns audit's flags into the auditor's own options (the
// loop's settings are consumeConfig.settings'): the one place the CLI
// builds them.
func (cfg *auditConfig) auditOptions(c *cli.Context) ([]audit.Opt, error) {
	cc := &cfg.consume
	inputs := cc.inputTopics.Value()
	if len(inputs) == 0 {
		return nil, usageErr("--%s is required", flagInputTopic)
	}
	l, err := cfg.layout.layout()
	if err != nil {
		return nil, asUsage(err)
	}
	vf, err := cfg.readFormat(l)
	if err != nil {
		return nil, err
	}
	// The default is derived, so "" (set on purpose) can mean off.
	topic := inputs[0] + ".audit"
	if c.IsSet(flagAuditTopic) {
		topic = cfg.auditTopic
	}
	opts := []audit.Opt{
		audit.Topic(topic),
		audit.Layout(l),
		audit.NumberField(cfg.numberField),
		audit.Format(vf),
		audit.DupWindow(cfg.dupWindow),
		audit.DupMaxEntries(cfg.dupMaxEntries),
		audit.MaxSkew(cfg.maxSkew),
		audit.MaxLag(cfg.maxLag),
		audit.CatchUp(cfg.catchUpTimeout > 0, cfg.catchUpTimeout),
	}
	for _, f := range []struct {
		name, list string
		opt        func(...int64) audit.Opt
	}{{flagAllowedServers, cfg.allowedServers, audit.AllowedServers}, {flagAllowedWorkers, cfg.allowedWorkers, audit.AllowedWorkers}} {
		if strings.TrimSpace(f.list) == "" {
			continue // unset or empty: any ID is allowed
		}
		ids, err := parseIDList(f.list)
		if err != nil {
			return nil, usageErr("--%s: %w", f.name, err)
		}
		opts = append(opts, f.opt(ids...))
	}
	if cfg.key != "" {
		spec, err := pipeline.ParseKeySpec(cfg.key)
		if err != nil {
			return nil, usageErr("--%s: %w", flagKey, err)
		}
		opts = append(opts, audit.Key(spec))
	}
	if cfg.stdout {
		opts = append(opts, audit.Stdout(c.App.Writer))
	}
	if cc.createTopics {
		opts = append(opts, audit.CreateTopic())
	}
	return opts, nil
}

// readFormat is the Format the audit reads numbers from values with, when a
// record has no number header: the JSON field, or the Avro or Protobuf
// field through the registry. It only reads, so it names no output topic.
func (cfg *auditConfig) readFormat(l idgen.Layout) (codec.Format, error) {
	cd, err := codec.New(codec.Config{Field: cfg.numberField})
	if err != nil {
		return nil, asUsage(err)
	}
	return cfg.schema.format(cd, "", codec.FormatString, func(id int64) error { _, err := l.Decompose(id); return err }, 0)
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
