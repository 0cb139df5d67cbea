package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/accounting"
	"github.com/flakestream/flakestream/test/harness"
	"github.com/flakestream/flakestream/test/testenv"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"github.com/urfave/cli/v2"
)

// secretName matches the name of a flag whose value is a secret.
var secretName = regexp.MustCompile(`password|secret|passphrase|credential|(^|-)token$`)

// leakCommands are the commands TestNoSecretLeaks runs: the long-running
// ones, which serve HTTP, and the ones that end by themselves, which print
// a report or numbers and log.
var leakCommands = []string{"run", "audit", "replay", "verify", "gen"}

// secretFlags are the flags of cmd that take a secret, found from their
// definitions: values, whose name says so, and URLs, whose usage says they
// may carry a password.
func secretFlags(t *testing.T, cmd string) (values, urls []string) {
	t.Helper()
	for _, fl := range App().Command(cmd).Flags {
		name := fl.Names()[0]
		usage := ""
		if df, ok := fl.(cli.DocGenerationFlag); ok {
			usage = df.GetUsage()
		}
		switch {
		case secretName.MatchString(name):
			values = append(values, name)
		case strings.Contains(strings.ToLower(usage), "password"):
			urls = append(urls, name)
		}
	}
	return values, urls
}

// plant is the distinct secret planted in one flag or URL part.
func plant(what string) string {
	return "planted" + strings.NewReplacer("-", "", "_", "").Replace(what) + "x9q"
}

// leakEnv is what the planted flags and URLs connect to.
type leakEnv struct {
	redisAddr, registry string
}

// urlPlanters build, for each flag that takes a URL which may carry a
// password, a URL that carries planted secrets in every place one can sit,
// and that works against env; and they name the secrets they planted. A
// new flag of that kind fails TestSecretFlagsArePlanted until it has one.
var urlPlanters = map[string]func(env leakEnv) (url string, secrets []string){
	flagRedis: func(env leakEnv) (string, []string) {
		return "redis://worker:" + plant("redis-url-password") + "@" + env.redisAddr + "/0", []string{plant("redis-url-password")}
	},
	flagSchemaRegistry: func(env leakEnv) (string, []string) {
		return strings.Replace(env.registry, "://", "://reg:"+plant("registry-url-password")+"@", 1), []string{plant("registry-url-password")}
	},
}

// Every flag of the leak commands that takes a secret is planted by
// TestNoSecretLeaks: a secret value by its name, a URL by a planter of
// its own, so a new flag of either kind cannot be missed.
func TestSecretFlagsArePlanted(t *testing.T) {
	found := map[string]bool{}
	for _, cmd := range leakCommands {
		values, urls := secretFlags(t, cmd)
		for _, name := range urls {
			found[name] = true
			if urlPlanters[name] == nil {
				t.Errorf("%s --%s may carry a password (its usage says so): give it a urlPlanter", cmd, name)
			}
		}
		for _, name := range values {
			found[name] = true
		}
	}
	for _, name := range []string{flagSASLPassword, flagSchemaRegistryPassword, flagRedis, flagSchemaRegistry} {
		if !found[name] {
			t.Errorf("--%s is not found as a flag that takes a secret", name)
		}
	}
}

// A secret given to run, audit, replay, verify or gen, in any flag or
// FLAKESTREAM_* variable that takes one, never comes out: not on any HTTP
// endpoint (metrics, health, the audit's page and API, every profile, the
// command line profile), not in any log line at the most verbose level
// (trace, which writes the debug and info lines too, and franz-go's own;
// replay's and verify's progress lines), not on standard output (verify's
// report, as text and JSON; gen's numbers), and not in the errors of a
// Redis that cannot be reached (a Sentinel URL carrying the data nodes' and
// the sentinels' passwords, for run and gen). run, replay, verify and gen
// get their secrets as flags (what /debug/pprof/cmdline used to print),
// audit as variables. The secrets are the real ones: the commands sign in
// to Kafka (SCRAM) and to Redis (an ACL user) with them.
func TestNoSecretLeaks(t *testing.T) {
	redis := testenv.RedisServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := redis.Client(t).Do(ctx, "ACL", "SETUSER", "worker", "reset", "on", ">"+plant("redis-url-password"), "+@all", "~*").Err(); err != nil {
		t.Fatal(err)
	}
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("reg:"+plant(flagSchemaRegistryPassword)))))
	defer reg.Close()
	env := leakEnv{redisAddr: redis.Addr, registry: reg.URL()}
	const user = "flakestream"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, plant(flagSASLPassword)),
		kfake.SeedTopics(2, "orders", "orders.numbered", "orders.dlq", "orders.numbered.audit", "orders.replayed", "orders.replayed.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth := kgo.SASL(scram.Auth{User: user, Pass: plant(flagSASLPassword)}.AsSha512Mechanism())
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	recs := orders.Records("orders", 2, 50, orders.Mix{}, 100, 0)
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Every secret planted, and the flags (and variables) that carry them.
	var secrets []string
	plantIn := func(cmd string) (flags []string) {
		values, urls := secretFlags(t, cmd)
		for _, name := range values {
			secrets = append(secrets, plant(name))
			flags = append(flags, name, plant(name))
		}
		for _, name := range urls {
			u, s := urlPlanters[name](env)
			secrets = append(secrets, s...)
			flags = append(flags, name, u)
		}
		return flags
	}
	common := []string{"--brokers", c.ListenAddrs()[0], "--sasl-mechanism", "scram-sha-512", "--sasl-user", user,
		"--schema-registry-user", "reg", "--log-level", "trace", "--http-addr", "127.0.0.1:0", "--pprof-addr", "127.0.0.1:0"}
	runArgs := append([]string{"run", "--input-topic", "orders", "--output-topic", "orders.numbered", "--server-id", "1", "--worker-id", "1"}, common...)
	planted := plantIn("run")
	for i := 0; i < len(planted); i += 2 {
		runArgs = append(runArgs, "--"+planted[i], planted[i+1])
	}
	// In a process of its own, os.Args would be these flags: what
	// /debug/pprof/cmdline printed. In-process, they are the test's own
	// unless set here.
	args := os.Args
	os.Args = append([]string{"flakestream"}, runArgs...)
	defer func() { os.Args = args }()
	worker := startApp(t, runArgs...)
	// Two apps parsing their flags at once race on urfave/cli's shared
	// help flag: the audit starts once the worker serves.
	if !accounting.WaitFor(time.Minute, func() bool { return strings.Contains(worker.stderr.String(), `msg="serving `) }) {
		t.Fatalf("the worker does not serve; its log:\n%s", harness.Tail(worker.stderr.String(), 3000))
	}
	for i, kv := 0, plantIn("audit"); i < len(kv); i += 2 {
		t.Setenv(envVar(kv[i]), kv[i+1])
	}
	aud := startApp(t, append([]string{"audit", "--input-topic", "orders.numbered"}, common...)...)

	// Wait until the worker has numbered every order and the audit has
	// read them, so every code path that touches a secret has run.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), auth, kgo.ConsumeTopics("orders.numbered"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < len(recs); {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d numbered orders; worker log:\n%s", got, len(recs), harness.Tail(worker.stderr.String(), 3000))
		}
		got += fs.NumRecords()
	}
	urls := map[string]string{}
	servingRe := regexp.MustCompile(`msg="serving ([^"]*)" addr=(\S+)`)
	for name, b := range map[string]*background{"run": worker, "audit": aud} {
		for _, m := range servingRe.FindAllStringSubmatch(b.stderr.String(), -1) {
			urls[name+" "+m[1]] = "http://" + m[2]
		}
	}
	if len(urls) != 4 {
		t.Fatalf("serving %v, want the metrics and the profiles of run and audit", urls)
	}
	auditMetrics := urls["audit the live page at / and /metrics, /healthz, /readyz"]
	if !accounting.WaitFor(time.Minute, func() bool {
		return metric(get(t, auditMetrics+"/metrics"), "flakestream_audit_records_total") >= float64(len(recs))
	}) {
		t.Fatalf("the audit did not read the numbered orders; its log:\n%s", harness.Tail(aud.stderr.String(), 3000))
	}

	var seen strings.Builder
	read := func(url string) {
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Fprintf(&seen, "GET %s: %d\n%s\n", url, res.StatusCode, body)
	}
	for what, base := range urls {
		paths := []string{"/metrics", "/healthz", "/readyz", "/", "/api/summary", "/app.js"}
		if strings.Contains(what, "pprof") {
			paths = []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap?debug=1",
				"/debug/pprof/allocs?debug=1", "/debug/pprof/threadcreate?debug=1", "/debug/pprof/symbol"}
		}
		for _, p := range paths {
			read(base + p)
		}
	}
	for _, b := range []*background{worker, aud} {
		if code, err := b.stop(30 * time.Second); err != nil || code != 0 {
			t.Errorf("exit %d, %v:\n%s", code, err, harness.Tail(b.stderr.String(), 2000))
		}
		seen.WriteString(b.stdout.String() + b.stderr.String())
	}

	// A Redis that cannot be reached, by a Sentinel URL with both kinds of
	// password: the retries' errors, at trace.
	sentinelURL := "redis+sentinel://worker:" + plant("sentinel-data-password") + "@127.0.0.1:1/mymaster?sentinel_username=s&sentinel_password=" + plant("sentinel-password")
	secrets = append(secrets, plant("sentinel-data-password"), plant("sentinel-password"))
	failing := startApp(t, "run", "--input-topic", "orders", "--output-topic", "orders.numbered", "--server-id", "1", "--worker-id", "2",
		"--brokers", c.ListenAddrs()[0], "--sasl-mechanism", "scram-sha-512", "--sasl-user", user, "--sasl-password", plant(flagSASLPassword),
		"--group", "leak-failing", "--log-level", "trace", "--http-addr", "", "--redis", sentinelURL)
	if !accounting.WaitFor(time.Minute, func() bool { return strings.Contains(failing.stderr.String(), "127.0.0.1:1") }) {
		t.Errorf("the run with an unreachable Sentinel logged no error naming it:\n%s", harness.Tail(failing.stderr.String(), 2000))
	}
	_, _ = failing.stop(30 * time.Second)
	seen.WriteString(failing.stdout.String() + failing.stderr.String())
	_, errOut, _ := runApp(t, "", nil, "run", "--redis", "redis+sentinel://worker:"+plant("sentinel-data-password")+"@127.0.0.1:1?sentinel_password="+plant("sentinel-password"))
	seen.WriteString(errOut)

	// The commands that end by themselves, each with its secrets as flags,
	// at its most verbose; want is what shows that its output was read.
	kafkaArgs := []string{"--brokers", c.ListenAddrs()[0], "--sasl-mechanism", "scram-sha-512", "--sasl-user", user,
		"--schema-registry-user", "reg", "--log-level", "trace", "--progress-every", "1ms"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"replay", "--input-topic", "orders", "--output-topic", "orders.replayed", "--dlq-topic", "orders.replayed.dlq",
			"--server-id", "1", "--worker-id", "3"}, kafkaArgs...), "replay complete"},
		{append([]string{"verify", "--input-topic", "orders", "--output-topic", "orders.numbered", "--dlq-topic", "orders.dlq",
			"--group", "flakestream"}, kafkaArgs...), "not_checkable"},
		{append([]string{"verify", "--json", "--input-topic", "orders", "--output-topic", "orders.replayed", "--dlq-topic", "orders.replayed.dlq",
			"--group", ""}, kafkaArgs...), `"exact":true`},
		{[]string{"gen", "--count", "3", "--server-id", "1", "--worker-id", "4"}, "\n"},
	} {
		args := tc.args
		for i, kv := 0, plantIn(tc.args[0]); i < len(kv); i += 2 {
			args = append(args, "--"+kv[i], kv[i+1])
		}
		out, errOut, code := runApp(t, "", nil, args...)
		if code != 0 || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%s: exit %d, and its output lacks %q: the test would miss what it hides:\n%s", tc.args[0], code, tc.want, harness.Tail(out+errOut, 2000))
		}
		seen.WriteString(out + errOut)
	}
	// gen rides through a Redis outage: its one line says so at once.
	gen := startApp(t, "gen", "--redis", sentinelURL)
	if !accounting.WaitFor(time.Minute, func() bool { return strings.Contains(gen.stderr.String(), "retrying") }) {
		t.Errorf("gen with an unreachable Sentinel said nothing:\n%s", harness.Tail(gen.stderr.String(), 2000))
	}
	_, _ = gen.stop(30 * time.Second)
	seen.WriteString(gen.stdout.String() + gen.stderr.String())

	all := seen.String()
	for _, level := range []string{"level=TRACE", "level=DEBUG", "level=INFO", "heap profile:", "flakestream_audit_records_total", "flakestream_ready",
		"replay progress", "verify progress", `"input":50`} {
		if !strings.Contains(all, level) {
			t.Errorf("nothing with %q was read: the test would miss a leak there", level)
		}
	}
	slices.Sort(secrets)
	secrets = slices.Compact(secrets) // planted once per command
	for _, s := range secrets {
		if i := strings.Index(all, s); i >= 0 {
			t.Errorf("secret %s leaked: %q", s, all[max(0, i-300):min(len(all), i+100)])
		}
	}
	if len(secrets) < 6 {
		t.Errorf("planted %d secrets, want at least 6: %v", len(secrets), secrets)
	}
}
