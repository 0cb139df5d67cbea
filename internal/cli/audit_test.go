package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flakestream/flakestream/audit"
	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/idgen"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/urfave/cli/v2"
)

func TestAuditCommandUserErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"audit"}, "--input-topic is required"},
		{[]string{"audit", "--input-topic", "t", "--allowed-servers", "1,x"}, `--allowed-servers: "x": want comma-separated`},
		{[]string{"audit", "--input-topic", "t", "--allowed-workers", "5-2"}, `--allowed-workers: "5-2"`},
		{[]string{"audit", "--input-topic", "t", "--allowed-servers", "40"}, "server id 40 does not fit in 5 bits"},
		{[]string{"audit", "--input-topic", "t", "--dup-window", "1ms"}, "dup window 1ms"},
		{[]string{"audit", "--input-topic", "t", "--time-bits", "40"}, "bit widths must add up to 63"},
		{[]string{"audit", "--input-topic", "t", "--audit-topic", "t"}, "is also an input topic"},
		{[]string{"audit", "--input-topic", "t", "--key", "header:"}, `--key: pipeline: invalid idempotency setting: key "header:"`},
	}
	for _, c := range cases {
		_, stderr, code := runApp(t, "", nil, c.args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
}

func TestParseIDList(t *testing.T) {
	cases := []struct {
		in   string
		want []int64
		ok   bool
	}{
		{"1", []int64{1}, true},
		{"1,2,5-7", []int64{1, 2, 5, 6, 7}, true},
		{" 3 , 0-1 ", []int64{3, 0, 1}, true},
		{"", nil, false},
		{"1,,2", nil, false},
		{"-1", nil, false},
		{"2-", nil, false},
		{"0-99999999", nil, false},
	}
	for _, c := range cases {
		got, err := parseIDList(c.in)
		if (err == nil) != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseIDList(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

// The done-when, literally: records that kcat writes straight to a
// numbered topic are audited by `flakestream audit`; a duplicated number
// comes out flagged duplicate, a number that goes down within a partition
// backwards, and the others clean. The audit topic has one record for
// each, read_committed, and --stdout prints the same.
func TestAuditCommandKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		testenv.Missing(t, "kcat not on PATH (apt-get install kcat)")
	}
	k := testenv.Kafka(t)
	topic := k.NewTopic(t, 2)
	broker := strings.Join(k.Addrs, ",")
	l := idgen.DefaultLayout()
	now := time.Now()
	id := func(d time.Duration, seq int64) int64 {
		n, err := l.Compose(now.Add(d).UnixMilli(), 3, 1, seq)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	kcat := func(partition string, stdin string, extra ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		args := append([]string{"-P", "-b", broker, "-t", topic, "-p", partition}, extra...)
		cmd := exec.CommandContext(ctx, "kcat", args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
	}
	a, b, lower, c := id(-3*time.Second, 0), id(-2*time.Second, 0), id(-2500*time.Millisecond, 0), id(-time.Second, 0)
	// Partition 0: the numbers in the JSON field, one of them twice, one
	// below its predecessor.
	kcat("0", fmt.Sprintf("{\"order_no\":\"%d\"}\n{\"order_no\":\"%d\"}\n{\"order_no\":\"%d\"}\n{\"order_no\":\"%d\"}\n{\"order_no\":%d}\n", a, b, b, lower, c))
	// Partition 1: the number in the header only.
	kcat("1", "{\"order_ref\":\"x\"}\n", "-H", fmt.Sprintf("%s=%d", codec.HeaderNumber, a+1))
	want := map[string][]string{topic + "/0/0": nil, topic + "/0/1": nil, topic + "/0/2": {"duplicate"},
		topic + "/0/3": {"backwards"}, topic + "/0/4": nil, topic + "/1/0": nil}

	// In-process: the app's standard output is a pipe read line by line,
	// and cancelling its context is the SIGTERM main turns into the same.
	pr, pw := io.Pipe()
	stderr := &harness.SyncBuffer{}
	app := App()
	app.Writer, app.ErrWriter = pw, stderr
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	exited := make(chan int, 1)
	go func() {
		code := Run(runCtx, app, []string{"flakestream", "audit", "--brokers", broker, "--input-topic", topic, "--create-topics", "--stdout",
			"--http-addr", "127.0.0.1:0", "--group", topic + "-audit", "--instance-id", "t", "--allowed-servers", "3"})
		pw.Close()
		exited <- code
	}()
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(lines) }
	if !accounting.WaitFor(60*time.Second, func() bool { return count() >= len(want) }) {
		t.Fatalf("%d audit lines of %d; stderr:\n%s", count(), len(want), stderr.String())
	}
	stop()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d after cancel:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30s of cancel")
	}
	mu.Lock()
	defer mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := accounting.ReadCommitted(ctx, k.Addrs, topic+".audit")
	if err != nil {
		t.Fatal(err)
	}
	var topicLines []string
	for _, r := range recs {
		topicLines = append(topicLines, string(r.Value))
	}
	for name, got := range map[string][]string{"stdout": lines, "audit topic": topicLines} {
		if len(got) != len(want) {
			t.Fatalf("%s: %d audit records, want %d:\n%s", name, len(got), len(want), strings.Join(got, "\n"))
		}
		for _, line := range got {
			rec, err := codec.ParseAuditRecord([]byte(line))
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			loc := string(codec.AppendSource(nil, rec.Topic, rec.Partition, rec.Offset))
			if w, ok := want[loc]; !ok || !reflect.DeepEqual(rec.Anomalies, w) || !rec.Valid || rec.Server != 3 {
				t.Errorf("%s: %s: %s, want anomalies %q", name, loc, line, w)
			}
		}
	}
}

// The audit command's settings come from flags, FLAKESTREAM_* variables and
// the YAML file, and "" turns the audit topic off wherever it is set.
func TestAuditCommandConfig(t *testing.T) {
	dir := t.TempDir()
	yamlFile := func(body string) string {
		f := filepath.Join(dir, fmt.Sprintf("c%d.yaml", time.Now().UnixNano()))
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name  string
		env   map[string]string
		args  []string
		topic string
		srv   []int64
		lagMs int64
		key   string
	}{
		{"example file", nil, []string{"--config", "../../configs/audit.yaml"}, "orders.numbered.audit", []int64{1}, 300000, ""},
		{"default topic", nil, []string{"--input-topic", "in"}, "in.audit", nil, 300000, ""},
		{"off by flag", nil, []string{"--input-topic", "in", "--audit-topic", ""}, "", nil, 300000, ""},
		{"off by env", map[string]string{"FLAKESTREAM_AUDIT_TOPIC": ""}, []string{"--input-topic", "in"}, "", nil, 300000, ""},
		{"off by file", nil, []string{"--config", yamlFile("input-topic: [in]\naudit-topic: \"\"\nallowed-servers: \"1,3-4\"\nmax-lag: 0s\n")}, "", []int64{1, 3, 4}, 0, ""},
		{"env over file", map[string]string{"FLAKESTREAM_ALLOWED_SERVERS": "7"}, []string{"--config", "../../configs/audit.yaml"}, "orders.numbered.audit", []int64{7}, 300000, ""},
		{"flag over env", map[string]string{"FLAKESTREAM_MAX_LAG": "1m"}, []string{"--input-topic", "in", "--max-lag", "2m"}, "in.audit", nil, 120000, ""},
		{"key by flag", nil, []string{"--input-topic", "in", "--key", "field:order_ref"}, "in.audit", nil, 300000, "field:order_ref"},
		{"key by env", map[string]string{"FLAKESTREAM_KEY": "header:order-ref"}, []string{"--input-topic", "in"}, "in.audit", nil, 300000, "header:order-ref"},
		{"key by file", nil, []string{"--config", yamlFile("input-topic: [in]\nkey: key\n")}, "in.audit", nil, 300000, "key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg := newAuditConfig()
			cmd := cfg.command()
			var summary struct {
				AuditTopic string  `json:"audit_topic"`
				Servers    []int64 `json:"allowed_servers"`
				MaxLagMs   int64   `json:"max_lag_ms"`
				Key        string  `json:"key"`
			}
			cmd.Action = func(c *cli.Context) error {
				opts, err := cfg.auditOptions(c)
				if err != nil {
					return err
				}
				s, err := cfg.consume.settings(&cfg.kafka, cfg.consume.inputTopics.Value(), slog.New(slog.DiscardHandler), nil)
				if err != nil {
					return err
				}
				a, err := audit.New(s, opts...)
				if err != nil {
					return err
				}
				rec := httptest.NewRecorder()
				a.Handlers()["/api/summary"].ServeHTTP(rec, httptest.NewRequest("GET", "/api/summary", nil))
				return json.Unmarshal(rec.Body.Bytes(), &summary)
			}
			app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
			if err := app.Run(append([]string{"flakestream", "audit"}, c.args...)); err != nil {
				t.Fatal(err)
			}
			if summary.AuditTopic != c.topic || !reflect.DeepEqual(summary.Servers, c.srv) || summary.MaxLagMs != c.lagMs || summary.Key != c.key {
				t.Fatalf("audit topic %q, allowed servers %v, max lag %dms, key %q; want %q, %v, %dms, %q",
					summary.AuditTopic, summary.Servers, summary.MaxLagMs, summary.Key, c.topic, c.srv, c.lagMs, c.key)
			}
		})
	}
}

// `demo --json` audits its output and reports every anomaly kind, all zero
// on its clean data.
func TestDemoAuditsClean(t *testing.T) {
	out, stderr, code := runApp(t, "", nil, "demo", "--json", "--orders", "5000")
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, stderr)
	}
	var got struct {
		Numbered, Passthrough, Audited int
		Anomalies                      map[string]int64
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("demo --json: %v: %q", err, out)
	}
	want := map[string]int64{}
	for _, k := range audit.AnomalyKinds() {
		want[k] = 0
	}
	if !reflect.DeepEqual(got.Anomalies, want) || got.Audited != got.Numbered+got.Passthrough || got.Passthrough == 0 {
		t.Fatalf("demo: audited %d of %d+%d, anomalies %v; want all audited and %v", got.Audited, got.Numbered, got.Passthrough, got.Anomalies, want)
	}
}
