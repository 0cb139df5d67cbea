// Command soak repeats one fault of the test/faults suite N times on real Apache
// Kafka and prints how many runs were exactly once ("10/10 exact"), so that
// a rare failure is counted, not hoped away.
//
//	go run ./test/soak -fault cluster-txn-coordinator -runs 10
//	go run ./test/soak -fault broker-kill -runs 20
//	go run ./test/soak -list
//
// It builds the test/faults test binary once, runs it once per run (each run starts
// its own brokers and Redis through test/testenv, so FLAKESTREAM_KAFKA_LOCAL=1
// is set for it), reads the run's result lines (faults.jsonl), and counts
// a run as exact when the test passed and every result of it had 0 lost,
// 0 duplicated and ok. Every result line is also appended to
// <artifacts>/faults.jsonl and each run's logs kept under <artifacts>/soak/.
// It exits 1 unless every run was exact.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// fault is a row of the fault table that soak can repeat.
type fault struct {
	run  string   // -test.run pattern
	env  []string // extra environment
	what string
}

var faults = map[string]fault{
	"cluster-txn-coordinator":   {run: "^TestClusterFaultTxnCoordinator$", what: "3 nodes: SIGKILL the transaction coordinator x3 during 500,000 orders, restart after 10-20 s"},
	"cluster-leader-output":     {run: "^TestClusterFaultLeader$/^output$", what: "3 nodes: SIGKILL the leader of the output partitions"},
	"cluster-leader-input":      {run: "^TestClusterFaultLeader$/^input$", what: "3 nodes: SIGKILL the leader of the input partitions"},
	"cluster-group-coordinator": {run: "^TestClusterFaultGroupCoordinator$", what: "3 nodes: SIGKILL the group coordinator"},
	"cluster-rolling-restart":   {run: "^TestClusterFaultRollingRestart$", what: "3 nodes: SIGTERM each node in turn"},
	"cluster-node-down":         {run: "^TestClusterFaultNodeDown$", what: "3 nodes: one node down for the second half (ISR 2)"},
	"broker-kill": {run: "^TestFaultBrokerRestart$/^killed$", env: []string{"FLAKESTREAM_FAULT_BROKER_KILL=1"},
		what: "1 broker: SIGKILL and start"},
	"broker-restart": {run: "^TestFaultBrokerRestart$/^clean$", what: "1 broker: SIGTERM and start"},
	// Faults that hang (docs/hang-faults.md).
	"partition-broker": {run: "^TestFaultPartitionBroker$", what: "1 broker: the workers' listener dropped 12 s (iptables)"},
	"partition-redis":  {run: "^TestFaultPartitionRedis$", what: "Redis's port dropped 15 s (iptables)"},
	"pause-worker":     {run: "^TestFaultPauseWorker$", what: "2 workers: one SIGSTOPped 15 s, then resumed (a zombie)"},
	"pause-broker":     {run: "^TestFaultPauseBroker$", what: "1 broker: its JVM SIGSTOPped 10 s"},
	"pause-redis":      {run: "^TestFaultPauseRedis$", what: "Redis SIGSTOPped 10 s"},
	"cluster-partition-txn-coordinator": {run: "^TestClusterFaultPartitionTxnCoordinator$",
		what: "3 nodes: the workers cut off from the transaction coordinator's node 15 s (iptables)"},
	"cluster-isolate-node": {run: "^TestClusterFaultIsolateNode$",
		what: "3 nodes: the leader of most output partitions cut off from the other two 20 s (iptables, cgroups)"},
	"nemesis": {run: "^TestNemesis$", what: "3 nodes, 3 workers, Redis: a random schedule of kills, pauses and partitions (-seed, -for)"},
	"cluster-pause-txn-coordinator": {run: "^TestClusterFaultPauseTxnCoordinator$",
		what: "3 nodes: the transaction coordinator's node SIGSTOPped 15 s"},
}

// result is the part of a faults.jsonl line that soak reads.
type result struct {
	Fault         string  `json:"fault"`
	Test          string  `json:"test"`
	Records       int     `json:"records"`
	Lost          int     `json:"lost"`
	Duplicated    int     `json:"duplicated"`
	LongestStallS float64 `json:"longest_stall_s"`
	DurationS     float64 `json:"duration_s"`
	WorkerExits   int     `json:"worker_exits"`
	OK            bool    `json:"ok"`
	Extra         struct {
		Schedule []string `json:"schedule"` // the nemesis's
	} `json:"extra"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// options are soak's flags.
type options struct {
	name, scale, artifacts, workerArgs string
	runs                               int
	timeout                            time.Duration
	seed                               uint64        // FLAKESTREAM_FAULT_SEED; 0: each run its own
	nemesisFor                         time.Duration // how long the nemesis runs
	list, verbose                      bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.name, "fault", "", "the fault to repeat (see -list)")
	flag.IntVar(&o.runs, "runs", 10, "how many runs")
	flag.StringVar(&o.scale, "scale", "", "FLAKESTREAM_FAULT_SCALE for every run (default: the suite's, 1 on real Kafka)")
	flag.StringVar(&o.artifacts, "artifacts", envOr("FLAKESTREAM_ARTIFACTS", "artifacts"), "dir for faults.jsonl and soak/<fault>/<run>/ logs")
	flag.DurationVar(&o.timeout, "run-timeout", 20*time.Minute, "bound of one run")
	flag.BoolVar(&o.list, "list", false, "list the faults and exit")
	flag.BoolVar(&o.verbose, "v", false, "print each run's test output")
	flag.Uint64Var(&o.seed, "seed", 0, "FLAKESTREAM_FAULT_SEED for every run: repeats a run's fault times (the nemesis: its schedule); 0: random")
	flag.DurationVar(&o.nemesisFor, "for", 10*time.Minute, "how long the nemesis runs (-fault nemesis)")
	flag.StringVar(&o.workerArgs, "worker-args", "", "extra flags for every worker (FLAKESTREAM_E2E_WORKER_ARGS), e.g. to turn a feature off for a comparison")
	flag.Parse()
	runsSet := false
	flag.Visit(func(f *flag.Flag) { runsSet = runsSet || f.Name == "runs" })
	if o.name == "nemesis" {
		if !runsSet {
			o.runs = 1 // one schedule is a long run
		}
		o.timeout = max(o.timeout, o.nemesisFor+15*time.Minute)
	}
	return o
}

func run() error {
	o := parseFlags()
	if o.list {
		listFaults()
		return nil
	}
	f, ok := faults[o.name]
	if !ok {
		return fmt.Errorf("unknown -fault %q (see -list)", o.name)
	}
	if o.runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", o.runs)
	}
	f.env = append([]string(nil), f.env...)
	if o.seed != 0 {
		f.env = append(f.env, fmt.Sprintf("FLAKESTREAM_FAULT_SEED=%d", o.seed))
	}
	if o.name == "nemesis" {
		f.env = append(f.env, "FLAKESTREAM_NEMESIS_FOR="+o.nemesisFor.String())
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := prepare(ctx, root, o)
	if err != nil {
		return err
	}
	with := ""
	if o.workerArgs != "" {
		with = ", worker flags " + o.workerArgs
	}
	fmt.Printf("soak: %s (%s), %d runs%s; logs in %s\n", o.name, f.what, o.runs, with, s.base)

	nExact, runs := 0, o.runs
	for i := 1; i <= o.runs; i++ {
		if ctx.Err() != nil {
			fmt.Printf("soak: interrupted after %d runs\n", i-1)
			runs = i - 1
			break
		}
		good, err := s.runNumbered(ctx, i, f, o)
		if err != nil {
			return err
		}
		if good {
			nExact++
		}
	}
	fmt.Printf("soak: %s: %d/%d exact\n", o.name, nExact, runs)
	if nExact != runs || runs == 0 {
		return errors.New("not every run was exact")
	}
	return nil
}

func listFaults() {
	names := make([]string, 0, len(faults))
	for n := range faults {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("%-26s %s\n", n, faults[n].what)
	}
}

// soak is where the runs of one soak write: art holds faults.jsonl, base
// the test binary and a folder per run.
type soak struct {
	root, art, base, bin string
}

// prepare makes the soak's folder and builds the test/faults test binary into it.
func prepare(ctx context.Context, root string, o options) (*soak, error) {
	art, err := filepath.Abs(o.artifacts)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(art, "soak", o.name, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	bin := filepath.Join(base, "e2e.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./test/faults/")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c ./test/faults/: %w\n%s", err, out)
	}
	return &soak{root: root, art: art, base: base, bin: bin}, nil
}

// runNumbered is run i of o.runs: it runs the test once, appends its
// results to faults.jsonl, prints its line and reports whether it was
// exact. Its error is one that ends the soak (a file it could not write).
func (s *soak) runNumbered(ctx context.Context, i int, f fault, o options) (bool, error) {
	dir := filepath.Join(s.base, fmt.Sprintf("run-%02d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	started := time.Now()
	res, testErr := runOnce(ctx, s.root, s.bin, dir, f, o.scale, o.workerArgs, o.timeout, o.verbose)
	good := exact(res, testErr)
	var parts []string
	for _, r := range res {
		parts = append(parts, fmt.Sprintf("records=%d lost=%d duplicated=%d longest_stall=%.1fs worker_exits=%d ok=%v",
			r.Records, r.Lost, r.Duplicated, r.LongestStallS, r.WorkerExits, r.OK))
		if err := appendJSONL(filepath.Join(s.art, "faults.jsonl"), r.raw()); err != nil {
			return false, err
		}
		if len(r.Extra.Schedule) > 0 {
			fmt.Printf("run %2d schedule:\n  %s\n", i, strings.Join(r.Extra.Schedule, "\n  "))
		}
	}
	verdict := "EXACT"
	if !good {
		verdict = "NOT EXACT"
		if testErr != nil {
			parts = append(parts, "test failed: "+testErr.Error())
		}
		if len(res) == 0 {
			parts = append(parts, "no result recorded")
		}
	}
	fmt.Printf("run %2d/%d %-9s %s (%s; log %s)\n", i, o.runs, verdict, strings.Join(parts, "; "),
		time.Since(started).Round(time.Second), filepath.Join(dir, "test.log"))
	return good, nil
}

// exact reports whether a run was exactly once: the test passed, recorded
// at least one result, and every result had 0 lost, 0 duplicated and ok.
func exact(res []rawResult, testErr error) bool {
	if testErr != nil || len(res) == 0 {
		return false
	}
	for _, r := range res {
		if !r.OK || r.Lost != 0 || r.Duplicated != 0 {
			return false
		}
	}
	return true
}

// rawResult keeps the whole JSON line next to the fields soak reads.
type rawResult struct {
	result
	line []byte
}

func (r rawResult) raw() []byte { return r.line }

// runOnce runs the test binary once with its artifacts in dir and returns
// the results it recorded.
func runOnce(ctx context.Context, root, bin, dir string, f fault, scale, workerArgs string, timeout time.Duration, verbose bool) ([]rawResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	logf, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, bin, "-test.run", f.run, "-test.count", "1", "-test.v",
		"-test.timeout", timeout.String())
	cmd.Dir = filepath.Join(root, "test/faults")
	cmd.Env = append(os.Environ(), "FLAKESTREAM_KAFKA_LOCAL=1", "FLAKESTREAM_ARTIFACTS="+dir)
	if scale != "" {
		cmd.Env = append(cmd.Env, "FLAKESTREAM_FAULT_SCALE="+scale)
	}
	if workerArgs != "" {
		cmd.Env = append(cmd.Env, "FLAKESTREAM_E2E_WORKER_ARGS="+workerArgs)
	}
	cmd.Env = append(cmd.Env, f.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if verbose {
		cmd.Stdout = io.MultiWriter(logf, os.Stdout)
		cmd.Stderr = cmd.Stdout
	}
	cmd.WaitDelay = 30 * time.Second
	// SIGTERM first: the test's cleanups stop the brokers it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	testErr := cmd.Run()
	if testErr == nil {
		if b, err := os.ReadFile(filepath.Join(dir, "test.log")); err == nil && bytes.Contains(b, []byte("--- SKIP")) {
			testErr = errors.New("skipped (see the log)")
		}
	}
	res, err := readResults(filepath.Join(dir, "faults.jsonl"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return res, testErr
}

func readResults(path string) ([]rawResult, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []rawResult
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var r result
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, rawResult{result: r, line: line})
	}
	return out, sc.Err()
}

func appendJSONL(path string, line []byte) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	_, err = fmt.Fprintf(fh, "%s\n", line)
	return err
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run soak inside the flakestream module")
	}
	return filepath.Dir(mod), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
