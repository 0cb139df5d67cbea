package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The suite's rows on a secured broker (scripts/kafka-local start --secure:
// SASL_SSL with SCRAM-SHA-512, client certificates required,
// StandardAuthorizer), each command signed in as a principal of its own
// that holds exactly its rows of docs/security.md's ACL table and nothing
// on the cluster. The suite's own producer, monitor and accounting sign in
// as the super user. One broker for the test, restarted by the last row.
//
//   - pipeline: the worker numbers a stream; verify (its own principal)
//     agrees with the suite's accounting; replay and audit, each under its
//     own rows, do their work on the same topics; each of them, and
//     verify, with one of its rows revoked, ends with its one-line refusal.
//   - worker-killed: the worker killed with SIGKILL mid-stream, restarted.
//   - broker-killed: the broker killed with SIGKILL mid-stream and started
//     again; the worker's orphaned-transaction guard ends what the crash
//     left open with its own rights only.
func TestSecureRows(t *testing.T) {
	k := testenv.RealKafka(t, testenv.KafkaSecured(testenv.ClientAuthRequired))
	redis := testenv.RedisServer(t)
	harness.Binary(t)
	t.Run("pipeline", func(t *testing.T) {
		e := secureEnv(t, k, redis)
		n := scaled(e.Env, 40000)
		r := begin(t, e.Env, "secured: pipeline", "1 worker, 4 partitions, SASL_SSL + mTLS, docs/security.md's ACLs",
			append(e.workerArgs, "--max-poll-records", "5000")...)
		r.p.start("a")
		r.stream(harness.StreamConfig{Records: n, Rate: 10000, Mix: orders.Mix{BadPerMille: 5, NumberedPerMille: 5}})
		r.finish(time.Duration(n/10000)*time.Second + 2*time.Minute)
		if t.Failed() {
			return
		}
		secureReplay(t, e)
		secureAudit(t, e)
		secureVerifyRefused(t, e)
	})
	t.Run("worker-killed", func(t *testing.T) {
		e := secureEnv(t, k, redis)
		n := scaled(e.Env, 100000)
		rate := 10000
		r := begin(t, e.Env, "secured: worker SIGKILL x2, restart", "1 worker, 4 partitions, SASL_SSL + mTLS, docs/security.md's ACLs",
			append(e.workerArgs, "--max-poll-records", "5000", "--session-timeout", "6s", "--static-membership")...)
		r.p.start("w")
		r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
		flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
		r.crashes(2, "w", 1, flow, n)
		r.finish(flow + 2*time.Minute)
	})
	t.Run("broker-killed", func(t *testing.T) {
		e := secureEnv(t, k, redis)
		keepEvidence(t, e.Env)
		n := scaled(e.Env, 60000)
		rate := 10000
		r := begin(t, e.Env, "secured: broker SIGKILL, start", "1 worker, 4 partitions, SASL_SSL + mTLS, docs/security.md's ACLs, the broker killed and started",
			append(e.workerArgs, "--max-poll-records", "5000")...)
		r.p.start("a")
		r.stream(harness.StreamConfig{Records: n, Rate: rate, Mix: orders.Mix{BadPerMille: 2, NumberedPerMille: 2}})
		flow := time.Duration(float64(n) / float64(rate) * float64(time.Second))
		r.sleepUntil(r.spread(1, flow/4, flow/2)[0])
		f := r.m.Begin("broker killed (SIGKILL) and started")
		k.Kill(t)
		k.Start(t)
		r.m.End(f)
		t.Logf("broker back after %s", fmtDur(f.Restored.Sub(f.At)))
		r.finish(flow + 6*time.Minute) // a loaded machine restarts the JVM slowly
	})
}

// secured is a harness.Env on the secured broker with the principals
// that sign in to it.
type secured struct {
	*harness.Env
	workerArgs []string          // run's sign-in, as a principal with run's rows
	verifier   string            // the principal verify signs in as (Env.VerifyArgs)
	values     map[string]string // the ACL table's placeholders
}

// secureEnv makes the topics of a test on the secured broker k, a worker
// principal with run's rows and a verify principal with verify's (the
// suite's cross-check runs verify as it), and returns them.
func secureEnv(t *testing.T, k *testenv.KafkaCluster, redis *testenv.Redis) *secured {
	t.Helper()
	e := harness.NewEnv(t, k, redis, 4)
	values := map[string]string{"input": e.Input, "output": e.Output, "dlq": e.DLQ, "group": e.Group}
	worker, wpw := k.CreateUser(t, "worker")
	k.GrantCommand(t, worker, "run", values)
	verifier, vpw := k.CreateUser(t, "verify")
	k.GrantCommand(t, verifier, "verify", values)
	e.VerifyArgs = append(k.Secure().CLIArgs(verifier, vpw), "--group", e.Group)
	return &secured{Env: e, workerArgs: k.Secure().CLIArgs(worker, wpw), verifier: verifier, values: values}
}

// refusal runs a command that must be refused for want of the right row
// names: it waits for it to exit 1 (2 for verify, whose errors are usage
// or connection errors) with a last line that names the principal, the
// operation, the resource and the kafka-acls command.
func refusal(t *testing.T, name, user string, code int, row testenv.ACLRow, args ...string) {
	t.Helper()
	p := harness.Start(t, name, "", args...)
	select {
	case <-p.Done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s still runs 2 minutes after %s %s was revoked:\n%s", name, row.Resource, row.Name, harness.Tail(p.Stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimRight(p.Stderr.String(), "\n"), "\n")
	line := lines[len(lines)-1]
	if got := p.Cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("%s without %s %s: exit %d, want %d: %s", name, row.Resource, row.Name, got, code, line)
	}
	for _, want := range []string{"flakestream: not authorized: User:" + user + " may not ", "--allow-principal User:" + user, "kafka-acls.sh"} {
		if !strings.Contains(line, want) {
			t.Errorf("%s without %s %s: the last line lacks %q: %s", name, row.Resource, row.Name, want, line)
		}
	}
	t.Logf("%s without %s %s %v: %s", name, row.Resource, row.Name, row.Operations, line)
}

// row is command's row of the ACL table on resource.
func row(t *testing.T, command, resource, name string) testenv.ACLRow {
	t.Helper()
	for _, r := range testenv.ACLTable(t) {
		if r.Command == command && r.Resource == resource && r.Name == name {
			return r
		}
	}
	t.Fatalf("docs/security.md has no row %s %s %s", command, resource, name)
	return testenv.ACLRow{}
}

// secureReplay replays the whole input into a topic of its own as a
// principal with replay's rows: exactly once. Then, with its WRITE on the
// output revoked, a new replay ends with its one line.
func secureReplay(t *testing.T, e *secured) {
	t.Helper()
	k := e.Kafka
	out := e.Input + ".replayed"
	k.CreateTopic(t, out, e.Partitions)
	k.CreateTopic(t, out+".dlq", e.Partitions)
	user, pw := k.CreateUser(t, "replay")
	values := map[string]string{"input": e.Input, "output": out, "dlq": out + ".dlq"}
	k.GrantCommand(t, user, "replay", values)
	args := append([]string{"replay", "--brokers", strings.Join(k.Addrs, ","), "--redis", e.Redis.URL,
		"--redis-prefix", e.Input, "--input-topic", e.Input, "--output-topic", out, "--dlq-topic", out + ".dlq",
		"--server-id", "1", "--worker-id", "3", "--max-record-bytes", fmt.Sprint(harness.MaxRecordBytes),
		"--max-poll-records", "5000", "--txn-timeout", "5s"}, k.Secure().CLIArgs(user, pw)...)
	p := harness.Start(t, "replay", "", args...)
	p.WaitSuccess(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outRecs, err := accounting.ReadCommittedWith(ctx, k.ClientOpts(t), out)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := accounting.ReadCommittedWith(ctx, k.ClientOpts(t), out+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	rep := accounting.Check(e.Codec, e.Inputs(), outRecs, dlq)
	if !rep.OK() {
		t.Fatalf("the replay under replay's rows is not exactly once: %s", rep)
	}
	t.Logf("replay under replay's rows: %s", rep)

	// A new range (more input) that the replay may not write.
	r := row(t, "replay", "topic", "<output>")
	if n := k.RevokeRow(t, user, r, values); n == 0 {
		t.Fatalf("revoked nothing for %+v", r)
	}
	// Another range (from a time before the first record: all of it) is
	// another replay, which starts afresh.
	refusal(t, "replay", user, 1, r, append(args, "--from", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))...)
}

// secureAudit runs the audit over the pipeline's output as a principal with
// audit's rows, writing audit records exactly once to an audit topic: one
// per record of the output. Then, with READ on its group revoked, the
// audit ends with its one line.
func secureAudit(t *testing.T, e *secured) {
	t.Helper()
	k := e.Kafka
	topic, group := e.Output+".audit", e.Input+"-audit"
	k.CreateTopic(t, topic, e.Partitions)
	user, pw := k.CreateUser(t, "audit")
	values := map[string]string{"output": e.Output, "audit-topic": topic, "audit-group": group}
	k.GrantCommand(t, user, "audit", values)
	args := append([]string{"audit", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", e.Output, "--audit-topic", topic,
		"--group", group, "--instance-id", "audit-a", "--txn-timeout", "5s", "--http-addr", "", "--log-level", "debug"},
		k.Secure().CLIArgs(user, pw)...)
	p := harness.Start(t, "audit", "", args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outRecs, err := accounting.ReadCommittedWith(ctx, k.ClientOpts(t), e.Output)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, o := range outRecs {
		want[fmt.Sprintf("%s/%d/%d", o.Topic, o.Partition, o.Offset)] = true
	}
	if done, ok := waitGroupCommitted(t, e.Env, group, e.Output, int64(len(outRecs)), 2*time.Minute); !ok {
		t.Fatalf("the audit committed %d of %d output records:\n%s", done, len(outRecs), harness.Tail(p.Stderr.String(), 2000))
	}
	recs, err := accounting.ReadCommittedWith(ctx, k.ClientOpts(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		a, err := codec.ParseAuditRecord(r.Value)
		if err != nil {
			t.Fatalf("audit record %s/%d/%d: %v", topic, r.Partition, r.Offset, err)
		}
		at := fmt.Sprintf("%s/%d/%d", a.Topic, a.Partition, a.Offset)
		if !want[at] || seen[at] {
			t.Errorf("audit record for %s: no output record, or a second one", at)
		}
		seen[at] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("%d audit records for %d output records", len(seen), len(want))
	}
	t.Logf("audit under audit's rows: one audit record per output record (%d)", len(seen))

	r := row(t, "audit", "group", "<audit-group>")
	if n := k.RevokeRow(t, user, r, values); n == 0 {
		t.Fatalf("revoked nothing for %+v", r)
	}
	select {
	case <-p.Done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the audit still runs 2 minutes after its group's READ was revoked:\n%s", harness.Tail(p.Stderr.String(), 2000))
	}
	lines := strings.Split(strings.TrimRight(p.Stderr.String(), "\n"), "\n")
	if line := lines[len(lines)-1]; p.Cmd.ProcessState.ExitCode() != 1 || !strings.Contains(line, "not authorized: User:"+user+" may not READ group") {
		t.Fatalf("the audit without its group's READ: exit %d, last line %s", p.Cmd.ProcessState.ExitCode(), line)
	} else {
		t.Logf("audit without READ on its group: %s", line)
	}
}

// secureVerifyRefused takes verify's rights away one at a time. Without
// DESCRIBE_CONFIGS on the input, verify still reconciles (exact, exit 0)
// and says in one warning line, and a note, that it took the input as not
// compacted and which right that wants. Without READ on the output it ends
// with its one-line refusal (exit 2).
func secureVerifyRefused(t *testing.T, e *secured) {
	t.Helper()
	k, user := e.Kafka, e.verifier
	args := append([]string{"verify", "--brokers", strings.Join(k.Addrs, ","), "--input-topic", e.Input,
		"--output-topic", e.Output, "--dlq-topic", e.DLQ, "--max-record-bytes", fmt.Sprint(harness.MaxRecordBytes)}, e.VerifyArgs...)

	configs := kadm.NewACLs().Allow("User:" + user).Topics(e.Input).Operations(kadm.OpDescribeConfigs).
		ResourcePatternType(kadm.ACLPatternLiteral).AllowHosts()
	if n := k.DeleteACLs(t, configs); n != 1 {
		t.Fatalf("revoked %d ACLs for DESCRIBE_CONFIGS on %s, want 1", n, e.Input)
	}
	p := harness.Start(t, "verify without DESCRIBE_CONFIGS", "", append(args, "--json")...)
	p.WaitSuccess(t, 3*time.Minute)
	var warnings []string
	for _, l := range strings.Split(p.Stderr.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warnings = append(warnings, l)
		}
	}
	want := fmt.Sprintf("cannot tell whether input topic %s is compacted, taken as not compacted", e.Input)
	if len(warnings) != 1 || !strings.Contains(warnings[0], want) || !strings.Contains(warnings[0], "User:"+user+" may not DESCRIBE_CONFIGS topic") {
		t.Fatalf("verify without DESCRIBE_CONFIGS: warnings %q, want one that says %q and names the right", warnings, want)
	}
	t.Logf("verify without DESCRIBE_CONFIGS on the input: exact, and %s", warnings[0])

	r := row(t, "verify", "topic", "<output>")
	if n := k.RevokeRow(t, user, r, e.values); n == 0 {
		t.Fatalf("revoked nothing for %+v", r)
	}
	refusal(t, "verify", user, 2, r, args...)
}
