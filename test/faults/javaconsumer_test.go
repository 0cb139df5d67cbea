package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
)

// The reference client's framing of a record: headers only (no value, whose
// bytes may hold anything), with control characters for separators that no
// header of the worker's holds. A header prints as key:value (Kafka 4.4's
// formatter has no setting for that separator; no header key holds ':').
const (
	javaLineSep   = "\x1e"
	javaHeaderSep = "\x1f"
)

// javaConsumerAgrees reads the output and the DLQ once more with Apache
// Kafka's own console consumer (org.apache.kafka.tools.consumer.ConsoleConsumer
// from kafka-tools of the brokers' version, --isolation-level read_committed, printing
// headers) and checks that it sees as many records as the accounting rep
// counted in each, and that their source headers are exactly the input
// records, each once. It reports failures with t.Errorf and returns whether
// the reference client agreed.
func javaConsumerAgrees(t *testing.T, e *harness.Env, rep accounting.Report) bool {
	t.Helper()
	jars, err := testenv.KafkaTools()
	if err != nil {
		t.Errorf("Kafka's console consumer: %v", err)
		return false
	}
	out := javaConsume(t, e, jars, e.Output)
	dlq := javaConsume(t, e, jars, e.DLQ)
	ok := true
	if len(out) != rep.Numbered+rep.Passthrough {
		t.Errorf("Kafka's console consumer read %d output records (read_committed), the accounting %d", len(out), rep.Numbered+rep.Passthrough)
		ok = false
	}
	if len(dlq) != rep.DLQ {
		t.Errorf("Kafka's console consumer read %d dead letters (read_committed), the accounting %d", len(dlq), rep.DLQ)
		ok = false
	}
	want := map[string]bool{}
	for _, r := range e.Inputs() {
		want[string(codec.AppendSource(nil, r.Topic, r.Partition, r.Offset))] = true
	}
	seen := map[string]int{}
	var extra, dup []string
	for _, src := range append(out, dlq...) {
		seen[src]++
		switch {
		case !want[src]:
			extra = append(extra, src)
		case seen[src] == 2:
			dup = append(dup, src)
		}
	}
	missing := 0
	for src := range want {
		if seen[src] == 0 {
			missing++
		}
	}
	if missing > 0 || len(extra) > 0 || len(dup) > 0 {
		t.Errorf("Kafka's console consumer: source headers differ from the input: %d missing, %d not inputs (e.g. %q), %d twice (e.g. %q)",
			missing, len(extra), extra[:min(len(extra), 3)], len(dup), dup[:min(len(dup), 3)])
		ok = false
	}
	t.Logf("Kafka's console consumer (read_committed) agrees=%v: %d output and %d dead-letter records, %d distinct sources of %d inputs",
		ok, len(out), len(dlq), len(seen), len(want))
	return ok
}

// javaConsume reads topic from the beginning with the console consumer until
// it has been idle for 8 s, and returns the source header of each record
// ("" for a record without one).
func javaConsume(t *testing.T, e *harness.Env, jars, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(jars, "*"), "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(e.Kafka.Addrs, ","), "--topic", topic, "--from-beginning",
		"--isolation-level", "read_committed", "--timeout-ms", "8000",
		"--formatter-property", "print.headers=true", "--formatter-property", "print.value=false",
		"--formatter-property", "line.separator="+javaLineSep, "--formatter-property", "headers.separator="+javaHeaderSep)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	processed := strings.Contains(stderr.String(), "Processed a total of")
	if err != nil && !processed {
		t.Fatalf("Kafka's console consumer on %s: %v\n%s", topic, err, harness.Tail(stderr.String(), 3000))
	}
	var srcs []string
	for _, rec := range strings.Split(stdout.String(), javaLineSep) {
		if rec == "" {
			continue
		}
		src := ""
		for _, h := range strings.Split(rec, javaHeaderSep) {
			if k, v, ok := strings.Cut(h, ":"); ok && k == codec.HeaderSource {
				src = v // the last one, as accounting.Header takes
			}
		}
		srcs = append(srcs, src)
	}
	if i := strings.Index(stderr.String(), "Processed a total of"); i >= 0 {
		line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()[i:]), "\n")
		if want := fmt.Sprintf("Processed a total of %d messages", len(srcs)); line != want {
			t.Errorf("Kafka's console consumer on %s: %q, but %d records parsed", topic, line, len(srcs))
		}
	}
	return srcs
}
