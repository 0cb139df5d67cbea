// Command faultstable turns the fault suite's results (the JSON lines the
// test/faults tests append to $FLAKESTREAM_ARTIFACTS/faults.jsonl) into the
// Markdown table of bench/results/faults.md: one row per fault, the latest run
// of each, in the order the faults first appear.
//
//	go run ./test/faultstable [-kafka real|kfake|all] [-commands] artifacts/faults.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flakestream/flakestream/test/harness"
)

func main() {
	kafka := flag.String("kafka", "real", "which runs: real (a real broker), kfake, or all")
	commands := flag.Bool("commands", true, "list the command that reproduces each row under the table")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: faultstable [-kafka real|kfake|all] [-commands=false] [faults.jsonl ...] (default: stdin)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *kafka != "real" && *kafka != "kfake" && *kafka != "all" {
		fmt.Fprintf(os.Stderr, "faultstable: -kafka %q: want real, kfake or all\n", *kafka)
		os.Exit(2)
	}
	results, err := readResults(flag.Args(), *kafka)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultstable: %v\n", err)
		os.Exit(1)
	}
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "faultstable: no results")
		os.Exit(1)
	}
	printTable(results, *kafka, *commands)
}

// readResults reads the JSON lines of the named files (stdin when none)
// and keeps the runs on the kind of broker kafka names.
func readResults(names []string, kafka string) ([]harness.Result, error) {
	var results []harness.Result
	read := func(name string, r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			var res harness.Result
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				return fmt.Errorf("%s:%d: %v", name, n, err)
			}
			real := res.Kafka != "kfake"
			if kafka == "all" || (kafka == "real") == real {
				results = append(results, res)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		return nil
	}
	if len(names) == 0 {
		return results, read("stdin", os.Stdin)
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = read(name, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// printTable prints the latest run of each fault (and broker kind, with
// -kafka all) as a Markdown table, and with commands the command that
// reproduces each row.
func printTable(results []harness.Result, kafka string, commands bool) {
	var order []string
	latest := map[string]harness.Result{}
	for _, r := range results {
		k := r.Fault + "\x00" + r.Kafka
		if _, ok := latest[k]; !ok {
			order = append(order, k)
		}
		latest[k] = r
	}
	fmt.Println("| fault | records | lost | duplicated | renumbered | numbers reissued | `flakestream verify` | longest stall | time to recover |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|---:|---:|")
	for i, k := range order {
		r := latest[k]
		name := r.Fault
		if kafka == "all" {
			name += " (" + r.Kafka + ")"
		}
		if !r.OK {
			name += " **(failed: " + reasons(r) + ")**"
		}
		fmt.Printf("| %s [%d] | %s | %d | %d | %d | %d | %s | %s | %s |\n", name, i+1, thousands(r.Records), r.Lost, r.Duplicated, r.Renumbered, r.Reissued,
			verified(r), seconds(r.LongestStallS), recovery(r))
	}
	if commands {
		fmt.Println()
		for i, k := range order {
			r := latest[k]
			fmt.Printf("[%d] `%s` (%s; %s)\n", i+1, r.Command, r.Date, strings.ReplaceAll(r.Setup, "|", "/"))
		}
	}
}

// verified says what `flakestream verify` made of the run's topics: exact
// or not, as the suite's cross-check recorded it ("not run" for results
// from before the cross-check).
func verified(r harness.Result) string {
	v, ok := r.Extra["verify"].(map[string]any)
	if !ok {
		return "not run"
	}
	if v["exact"] == true {
		return "exact"
	}
	return fmt.Sprintf("not exact (lost %v, duplicated %v, renumbered %v)", v["lost"], v["duplicated"], v["renumbered"])
}

// reasons says what made a run fail besides the table's columns.
func reasons(r harness.Result) string {
	var out []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.Lost, "lost"}, {r.Duplicated, "duplicated"}, {r.Renumbered, "renumbered"}, {r.Reissued, "reissued"},
		{r.OrderViolations, "order violations"}, {r.Mismatched, "mismatched"},
		{r.Unattributed, "unattributed"}, {r.WorkerExits, "worker exits"},
	} {
		if c.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(out) == 0 {
		return "see the log"
	}
	return strings.Join(out, ", ")
}

func seconds(s float64) string { return fmt.Sprintf("%.1f s", s) }

func recovery(r harness.Result) string {
	switch {
	case len(r.Faults) == 0:
		return "–"
	case r.RecoverS < 0:
		return "never"
	}
	return seconds(r.RecoverS)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
