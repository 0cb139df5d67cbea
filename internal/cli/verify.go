package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flakestream/flakestream/pipeline"
	"github.com/flakestream/flakestream/verify"
	"github.com/urfave/cli/v2"
)

// verify's own flags; --from and --to are replay's.
const (
	flagFromOffsets  = "from-offsets"
	flagToOffsets    = "to-offsets"
	flagStallTimeout = "stall-timeout"
	flagWait         = "wait"
)

// verifyConfig is what `flakestream verify` reads from its flags.
type verifyConfig struct {
	consume       consumeConfig
	layout        layoutConfig
	codec         codecConfig
	schema        schemaConfig
	kafka         kafkaConfig
	ops           opsConfig
	from, to      string
	fromOffsets   string
	toOffsets     string
	allPartitions bool
	group         string
	wait          time.Duration
	json          bool
	progressEvery time.Duration
	stallTimeout  time.Duration
}

func verifyCommand() *cli.Command {
	cfg := &verifyConfig{}
	return configured(&cli.Command{
		Name:  "verify",
		Usage: "reconcile a range of input against the output and the DLQ, exactly: lost, duplicated, renumbered (exit 0 exact, 1 not, 2 error)",
		Flags: concat(
			cfg.consume.inputTopicsFlag(), cfg.consume.outputFlags(),
			rangeFlags(&cfg.from, &cfg.to, "the last stable offsets when verify starts"),
			[]cli.Flag{
				stringFlag(flagFromOffsets, &cfg.fromOffsets, "", "start of the range as partition:offset,... (or topic:partition:offset,...), instead of --from"),
				stringFlag(flagToOffsets, &cfg.toOffsets, "", "end of the range (exclusive) as partition:offset,... (or topic:partition:offset,...), instead of --to"),
				allPartitionsFlag(&cfg.allPartitions),
				// A second definition of --group: here it names the
				// worker's group, which verify only reads.
				stringFlag(flagGroup, &cfg.group, pipeline.DefaultGroup, "the worker's consumer group: an input record in neither the output nor the DLQ that it has not committed yet is pending, not lost (\"\": every such record is lost)"),
				durationFlag(flagWait, &cfg.wait, 0, "first wait up to this long for --group to commit the whole range, so that nothing is left pending (0: check at once)"),
				jsonFlag(&cfg.json, "print the report as one JSON object on standard output"),
				progressEveryFlag(&cfg.progressEvery),
				durationFlag(flagStallTimeout, &cfg.stallTimeout, verify.DefaultStallTimeout, "give up (exit 2) when a topic yields no record for this long while offsets are left to read"),
			},
			cfg.layout.flags(), cfg.codec.flags(), cfg.schema.flags(), cfg.kafka.flags(), cfg.ops.logFlags()),
		Action: cfg.run,
	})
}

// rangeFlags are --from and --to, for replay and verify; end says what
// "end" means to the command.
func rangeFlags(from, to *string, end string) []cli.Flag {
	return []cli.Flag{
		stringFlag(flagFrom, from, "start", "start of the range: start, an RFC 3339 time, or partition:offset,..."),
		stringFlag(flagTo, to, "end", "end of the range (exclusive): end ("+end+"), an RFC 3339 time, or partition:offset,..."),
	}
}

// progressEveryFlag is --progress-every, for replay and verify.
func progressEveryFlag(dst *time.Duration) cli.Flag {
	return durationFlag(flagProgressEvery, dst, defaultProgressEvery, "how often to log progress when standard error is not a terminal")
}

func (cfg *verifyConfig) run(c *cli.Context) error {
	// Every error before the report is a usage or connection error: exit 2.
	rep, err := cfg.verify(c)
	if err != nil {
		return asUsage(err)
	}
	w := c.App.Writer
	if cfg.json {
		enc := json.NewEncoder(w)
		if err := enc.Encode(rep); err != nil {
			return asUsage(err)
		}
	} else {
		printVerify(w, rep)
	}
	if !rep.Exact {
		return &exitError{code: 1, err: fmt.Errorf("verify: not exact: %s", faultSummary(rep.Counts))}
	}
	return nil
}

// verify runs the reconciliation the flags describe.
func (cfg *verifyConfig) verify(c *cli.Context) (verify.Result, error) {
	prog := newProgress(c.App.ErrWriter, "verify", cfg.progressEvery)
	log, err := cfg.ops.logger(prog)
	if err != nil {
		return verify.Result{}, err
	}
	prog.log = log
	cc := &cfg.consume
	inputs := cc.inputTopics.Value()
	if len(inputs) == 0 || cc.outputTopic == "" {
		return verify.Result{}, usageErr("--%s and --%s are required", flagInputTopic, flagOutputTopic)
	}
	from, err := cfg.bound(flagFrom, cfg.from, flagFromOffsets, cfg.fromOffsets)
	if err != nil {
		return verify.Result{}, err
	}
	to, err := cfg.bound(flagTo, cfg.to, flagToOffsets, cfg.toOffsets)
	if err != nil {
		return verify.Result{}, err
	}
	l, err := cfg.layout.layout()
	if err != nil {
		return verify.Result{}, err
	}
	cd, err := cfg.codec.codec(l)
	if err != nil {
		return verify.Result{}, err
	}
	// The output subject is never registered: verify only reads.
	f, err := cfg.codec.valueFormat(&cfg.schema, cd, l, cc.outputTopic)
	if err != nil {
		return verify.Result{}, err
	}
	// verify runs no loop, but reaches the cluster as the products do.
	s, err := cc.settings(&cfg.kafka, inputs, log, nil)
	if err != nil {
		return verify.Result{}, err
	}
	// Without --dlq-topic, run's default DLQ is checked if it exists.
	dlq, optional := cc.dlqTopic, false
	if dlq == "" {
		dlq, optional = inputs[0]+".dlq", true
	}
	if err := cfg.kafka.reach(c.Context, log); err != nil {
		return verify.Result{}, err
	}
	res, err := verify.Run(c.Context, verify.Config{Brokers: s.Brokers, KafkaOpts: s.KafkaOpts, Principal: s.Principal, Inputs: inputs,
		Output: cc.outputTopic, DLQ: dlq, OptionalDLQ: optional, From: from, To: to, AllPartitions: cfg.allPartitions, Group: cfg.group, Wait: cfg.wait, Format: f, Progress: prog.update,
		Log: log, StallTimeout: cfg.stallTimeout, Planned: limitMemory})
	prog.finish(err == nil)
	if err != nil {
		return verify.Result{}, err
	}
	return res, nil
}

// verifyHeadroom is what verify's memory limit allows above its ledger:
// the fetch buffers of its readers and the records being counted.
const verifyHeadroom = 96 << 20

// limitMemory sets the garbage collector's soft memory limit to the
// ledger of ranges plus verifyHeadroom, unless GOMEMLIMIT sets one, so
// that verify's peak stays near what it must hold rather than twice that
// (the default GOGC lets the heap double before collecting).
func limitMemory(ranges []verify.Range) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(verify.LedgerBytes(ranges) + verifyHeadroom)
	}
}

// bound parses --from or --to, or its -offsets form; both at once is a
// usage error.
func (cfg *verifyConfig) bound(flag, value, offsetsFlag, offsets string) (verify.Bound, error) {
	if offsets != "" {
		if value != "start" && value != "end" && value != "" {
			return verify.Bound{}, usageErr("--%s and --%s are the same bound: give one", flag, offsetsFlag)
		}
		b, err := verify.ParseOffsets(offsets)
		if err != nil {
			return verify.Bound{}, usageErr("--%s: %w", offsetsFlag, err)
		}
		return b, nil
	}
	b, err := verify.ParseBound(value)
	if err != nil {
		return verify.Bound{}, usageErr("--%s: %w", flag, err)
	}
	return b, nil
}

// faultSummary names the counts that make a report not exact.
func faultSummary(c verify.Counts) string {
	var parts []string
	for _, f := range []struct {
		name string
		n    int64
	}{{"lost", c.Lost}, {"duplicated", c.Duplicated}, {"renumbered", c.Renumbered}, {"duplicate_numbers", c.DuplicateNumbers},
		{"unattributed", c.Unattributed}, {"invalid_numbers", c.InvalidNumbers}} {
		if f.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.n))
		}
	}
	return strings.Join(parts, ", ")
}

// printVerify writes the report as a short table and the first faults of
// each kind.
func printVerify(w io.Writer, r verify.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	c := r.Counts
	for _, row := range []struct {
		name string
		n    int64
	}{{"input", c.Input}, {"numbered", c.Numbered}, {"passthrough", c.Passthrough}, {"dead_lettered", c.DeadLettered},
		{"lost", c.Lost}, {"pending", c.Pending}, {"duplicated", c.Duplicated}, {"renumbered", c.Renumbered}, {"duplicate_numbers", c.DuplicateNumbers},
		{"unattributed", c.Unattributed}, {"invalid_numbers", c.InvalidNumbers}, {"not_checkable", c.NotCheckable}, {"outside_range", c.OutsideRange}} {
		fmt.Fprintf(tw, "%s\t%d\n", row.name, row.n)
	}
	fmt.Fprintf(tw, "exact\t%t\n", c.Exact)
	_ = tw.Flush()
	fmt.Fprintf(w, "read %d records in %.1fs over %d input partitions\n", r.RecordsRead, r.Seconds, len(r.Ranges))
	if c.Pending > 0 {
		fmt.Fprintf(w, "note: %d records are pending: the worker has not committed them yet (no fault; --%s waits for them)\n", c.Pending, flagWait)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, k := range []struct {
		name   string
		faults []verify.Fault
	}{{"lost", r.Faults.Lost}, {"duplicated", r.Faults.Duplicated}, {"renumbered", r.Faults.Renumbered},
		{"duplicate_numbers", r.Faults.DuplicateNumbers}, {"unattributed", r.Faults.Unattributed}, {"invalid_numbers", r.Faults.InvalidNumbers}} {
		if len(k.faults) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s (first %d):\n", k.name, len(k.faults))
		for _, f := range k.faults {
			fmt.Fprintf(w, "  %s\n", faultLine(f))
		}
	}
}

func faultLine(f verify.Fault) string {
	var parts []string
	if f.Source != "" {
		parts = append(parts, "source "+f.Source)
	}
	if len(f.Numbers) > 0 {
		parts = append(parts, fmt.Sprintf("numbers %v", f.Numbers))
	}
	if len(f.Output) > 0 {
		parts = append(parts, "at "+strings.Join(f.Output, ", "))
	}
	if f.Reason != "" {
		parts = append(parts, f.Reason)
	}
	return strings.Join(parts, "; ")
}
