package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatFormat frames each consumed record so that binary keys and values
// parse back exactly: a line of partition, offset, timestamp, key length and
// value length; the key and value bytes; a newline; the headers (k=v,...)
// and a newline.
const kcatFormat = `REC %p %o %T %K %S\n%k%s\n%h\n`

// kcat runs kcat with args and stdin, bounded by 2 minutes.
func kcat(t *testing.T, stdin io.Reader, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, harness.Tail(errb.String(), 2000))
	}
	return out.Bytes()
}

// Orders written by kcat (librdkafka's producer, keyed, with a header),
// numbered by the worker, and read back by kcat as a read_committed
// consumer: every order exactly once in the output or the DLQ, as
// test/accounting counts it from what kcat printed. Where the binary has
// the audit command, kcat reads the audit topic too: one audit record per
// numbered record, decoding its number.
func TestKcatInterop(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		testenv.Missing(t, "kcat not on PATH (apt-get install kcat)")
	}
	e := newEnv(t, 3, false)
	broker := strings.Join(e.Kafka.Addrs, ",")
	const n = 5000
	mix := orders.Mix{BadPerMille: 12, NumberedPerMille: 10}

	// Write: one "key<TAB>value" line per order. No order holds a newline
	// or a tab; a bad one may hold invalid UTF-8 or 70 KB.
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, "ORD-%d\t%s\n", i, orders.Event(i, mix.KindOf(i), 200, 1<<40+int64(i)))
	}
	kcat(t, &in, "-P", "-b", broker, "-t", e.Input, "-K", "\t", "-H", "source-system=shop-eu",
		"-X", "enable.idempotence=true", "-X", "message.max.bytes=1000000")

	// What kcat wrote, with offsets and timestamps, is the accounting's
	// input.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inputs, err := accounting.ReadCommitted(ctx, e.Kafka.Addrs, e.Input)
	if err != nil || len(inputs) != n {
		t.Fatalf("read back %d of the %d orders kcat wrote: %v", len(inputs), n, err)
	}
	e.AddInputs(inputs)

	p := newPool(t, e, "--max-poll-records", "1000")
	p.start("a")
	// The audit consumer, where the binary has one, reads the numbered
	// topic as the worker writes it.
	audit := hasAudit(t)
	auditTopic, auditGroup := e.Output+".audit", e.Input+"-audit"
	if audit {
		harness.Start(t, "audit", filepath.Join(e.LogDir(), "audit.log"), "audit",
			"--brokers", broker, "--input-topic", e.Output, "--audit-topic", auditTopic,
			"--group", auditGroup, "--instance-id", "audit-a", "--create-topics",
			"--txn-timeout", "5s", "--http-addr", "", "--log-level", "debug")
	} else {
		t.Log("this flakestream has no audit command: the audit topic is not checked")
	}
	if c, ok := e.WaitCommitted(t, 2*time.Minute); !ok {
		t.Fatalf("the worker committed %d of %d orders", c, n)
	}
	p.stopAll()

	read := func(topic string) []*kgo.Record {
		out := kcat(t, nil, "-C", "-b", broker, "-t", topic, "-o", "beginning", "-e", "-q",
			"-X", "isolation.level=read_committed", "-f", kcatFormat)
		recs, err := parseKcat(topic, out)
		if err != nil {
			t.Fatalf("kcat output of %s: %v", topic, err)
		}
		return recs
	}
	outputs, dlq := read(e.Output), read(e.DLQ)
	rep := accounting.Check(e.Codec, inputs, outputs, dlq)
	t.Logf("kcat wrote %d orders; kcat read %d numbered and %d dead letters: %s", n, len(outputs), len(dlq), rep)
	if !rep.OK() {
		t.Fatalf("not exactly once as kcat sees it: %s", rep)
	}
	if audit {
		checkAudit(t, e, broker, auditTopic, auditGroup, inputs, outputs)
	}
	classes := map[string]int{}
	for _, d := range dlq {
		c, _ := accounting.Header(d, codec.HeaderErrorClass)
		classes[c]++
	}
	for _, k := range orders.BadKinds {
		if classes[k.Class()] == 0 {
			t.Errorf("kcat read no dead letter of class %s: %v", k.Class(), classes)
		}
	}
}

// hasAudit reports whether the flakestream binary has the audit command.
func hasAudit(t *testing.T) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, harness.Binary(t), "audit", "--help").Run() == nil
}

// checkAudit waits until the audit group has committed every numbered
// record, reads the audit topic with kcat (read_committed), and checks one
// audit record per numbered record, with the same number; for the numbers
// the worker issued (not the made-up ones of passed-through test events),
// also the worker's identity and no anomaly.
func checkAudit(t *testing.T, e *harness.Env, broker, topic, group string, inputs, outputs []*kgo.Record) {
	t.Helper()
	if done, ok := waitGroupCommitted(t, e, group, e.Output, int64(len(outputs)), 2*time.Minute); !ok {
		t.Fatalf("the audit consumer committed %d of %d numbered records", done, len(outputs))
	}
	out := kcat(t, nil, "-C", "-b", broker, "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", kcatFormat)
	recs, err := parseKcat(topic, out)
	if err != nil {
		t.Fatalf("kcat output of %s: %v", topic, err)
	}
	passed := map[string]bool{} // input records that came with a number
	for _, in := range inputs {
		if e.Codec.Inspect(in.Value).Kind == codec.HasNumber {
			passed[string(codec.AppendSource(nil, in.Topic, in.Partition, in.Offset))] = true
		}
	}
	want := map[string]int64{}  // numbered record -> its number
	issued := map[string]bool{} // numbered records whose number the worker issued
	for _, o := range outputs {
		num, _ := accounting.Header(o, codec.HeaderNumber)
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("numbered record %s/%d/%d: number header %q", o.Topic, o.Partition, o.Offset, num)
		}
		at := fmt.Sprintf("%s/%d/%d", o.Topic, o.Partition, o.Offset)
		want[at] = id
		src, _ := accounting.Header(o, codec.HeaderSource)
		issued[at] = !passed[src]
	}
	seen, bad := map[string]bool{}, 0
	for _, r := range recs {
		a, err := codec.ParseAuditRecord(r.Value)
		if err != nil {
			t.Fatalf("audit record %s/%d/%d: %v: %q", topic, r.Partition, r.Offset, err, r.Value)
		}
		at := fmt.Sprintf("%s/%d/%d", a.Topic, a.Partition, a.Offset)
		id, ok := want[at]
		switch {
		case !ok:
			t.Errorf("audit record for %s, which is no numbered record", at)
		case seen[at]:
			t.Errorf("two audit records for %s", at)
		case a.ID != id || issued[at] && (a.Server != 1 || a.Worker != 1 || len(a.Anomalies) > 0):
			if bad++; bad <= 5 {
				t.Errorf("audit record for %s: id %d server %d worker %d anomalies %v; want id %d, server 1, worker 1, none", at, a.ID, a.Server, a.Worker, a.Anomalies, id)
			}
		}
		seen[at] = true
	}
	if len(seen) != len(want) || bad > 0 {
		t.Fatalf("kcat read %d audit records for %d numbered records (%d wrong)", len(seen), len(want), bad)
	}
	t.Logf("kcat read %d audit records, one per numbered record, each decoding its number", len(recs))
}

// knownHeaders are the header keys kcat's k=v,k=v listing is split on: a
// header value (an error message) may hold commas.
var knownHeaders = []string{"source-system", codec.HeaderNumber, codec.HeaderSource, codec.HeaderErrorClass, codec.HeaderError}

// parseKcat parses records printed with kcatFormat.
func parseKcat(topic string, b []byte) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return recs, nil
		}
		if err != nil {
			return nil, err
		}
		f := strings.Fields(line)
		if len(f) != 6 || f[0] != "REC" {
			return nil, fmt.Errorf("record line %q", line)
		}
		var v [5]int64
		for i := range v {
			if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return nil, fmt.Errorf("record line %q: %w", line, err)
			}
		}
		rec := &kgo.Record{Topic: topic, Partition: int32(v[0]), Offset: v[1], Timestamp: time.UnixMilli(v[2])}
		if v[3] >= 0 {
			rec.Key = make([]byte, v[3])
			if _, err := io.ReadFull(r, rec.Key); err != nil {
				return nil, err
			}
		}
		if v[4] >= 0 {
			rec.Value = make([]byte, v[4])
			if _, err := io.ReadFull(r, rec.Value); err != nil {
				return nil, err
			}
		}
		if c, err := r.ReadByte(); err != nil || c != '\n' {
			return nil, fmt.Errorf("no newline after the value of %s/%d/%d", topic, rec.Partition, rec.Offset)
		}
		hl, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		rec.Headers = parseKcatHeaders(strings.TrimSuffix(hl, "\n"))
		recs = append(recs, rec)
	}
}

func parseKcatHeaders(s string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for s != "" {
		var h kgo.RecordHeader
		for _, k := range knownHeaders {
			if strings.HasPrefix(s, k+"=") {
				h.Key = k
				break
			}
		}
		if h.Key == "" {
			k, _, _ := strings.Cut(s, "=")
			h.Key = k
		}
		s = s[len(h.Key)+1:]
		// The value runs to the next ",<known key>=".
		end := len(s)
		for _, k := range knownHeaders {
			if i := strings.Index(s, ","+k+"="); i >= 0 && i < end {
				end = i
			}
		}
		h.Value = []byte(s[:end])
		hs = append(hs, h)
		s = strings.TrimPrefix(s[end:], ",")
	}
	return hs
}
