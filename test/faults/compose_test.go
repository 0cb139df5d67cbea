package faults_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flakestream/flakestream/codec"
	"github.com/flakestream/flakestream/internal/orders"
	"github.com/flakestream/flakestream/test/harness"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// docker-compose.yml cannot run without a Docker engine, but what it tells
// flakestream can: the worker and audit services run here as their compose
// command, configuration file (from the volume) and FLAKESTREAM_* variables
// say, with the service host names swapped for this test's broker and
// Redis, and topic and group names of the test's own. A renamed flag, a
// key the YAML file gets wrong, or a variable that does not parse fails it.
func TestComposeServicesRun(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, want := range []string{"kafka", "kafka-init", "redis", "worker", "audit"} {
		if _, ok := cf.Services[want]; !ok {
			t.Fatalf("docker-compose.yml has no %s service", want)
		}
	}
	for name, s := range cf.Services {
		for dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %s beyond 127.0.0.1", name, p)
			}
		}
	}

	e := newEnv(t, 3, false)
	// The service's command and variables, with its configuration file
	// read from where the volume mounts it from, and the test's services.
	service := func(name string, env map[string]string) (args, vars []string) {
		s := cf.Services[name]
		args = append([]string(nil), s.Command...)
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			dst, _, _ = strings.Cut(dst, ":")
			for i := range args {
				if args[i] == dst {
					args[i] = filepath.Join("../..", src)
					if _, err := os.Stat(args[i]); err != nil {
						return nil, nil
					}
				}
			}
		}
		merged := map[string]string{}
		for k, v := range s.Environment {
			merged[k] = composeInterpolate(v)
		}
		for k, v := range env {
			if _, ok := merged[k]; !ok && v != "" && !strings.HasSuffix(k, "_GROUP") && !strings.HasSuffix(k, "_PREFIX") {
				t.Errorf("service %s does not set %s, which the test overrides", name, k)
			}
			merged[k] = v
		}
		for _, k := range harness.SortedKeys(merged) {
			vars = append(vars, k+"="+merged[k])
		}
		return args, vars
	}
	args, vars := service("worker", map[string]string{
		"FLAKESTREAM_BROKERS":      strings.Join(e.Kafka.Addrs, ","),
		"FLAKESTREAM_REDIS":        e.Redis.URL,
		"FLAKESTREAM_INPUT_TOPIC":  e.Input,
		"FLAKESTREAM_OUTPUT_TOPIC": e.Output,
		"FLAKESTREAM_DLQ_TOPIC":    e.DLQ,
		"FLAKESTREAM_GROUP":        e.Group,
		"FLAKESTREAM_REDIS_PREFIX": e.Input,
		"FLAKESTREAM_HTTP_ADDR":    "127.0.0.1:0",
	})
	if args == nil {
		t.Fatal("the worker service's configuration file is missing")
	}
	t.Logf("worker: %s %s", strings.Join(vars, " "), strings.Join(args, " "))
	// Account with the size limit the configuration gives the worker.
	var wcfg struct {
		MaxRecordBytes int `yaml:"max-record-bytes"`
	}
	if raw, err := os.ReadFile(args[len(args)-1]); err != nil || yaml.Unmarshal(raw, &wcfg) != nil {
		t.Fatalf("read %s: %v", args[len(args)-1], err)
	}
	if wcfg.MaxRecordBytes == 0 {
		wcfg.MaxRecordBytes = codec.DefaultMaxBytes
	}
	if e.Codec, err = codec.New(codec.Config{MaxBytes: wcfg.MaxRecordBytes}); err != nil {
		t.Fatal(err)
	}
	startService(t, e, "worker", vars, args)

	auditArgs, auditVars := service("audit", map[string]string{
		"FLAKESTREAM_BROKERS":     strings.Join(e.Kafka.Addrs, ","),
		"FLAKESTREAM_INPUT_TOPIC": e.Output,
		"FLAKESTREAM_AUDIT_TOPIC": e.Output + ".audit",
		"FLAKESTREAM_GROUP":       e.Input + "-audit",
		"FLAKESTREAM_HTTP_ADDR":   "127.0.0.1:0",
	})
	if auditArgs == nil {
		t.Log("configs/audit.yaml does not exist yet: the audit service is not run")
	} else {
		e.Kafka.CreateTopic(t, e.Output+".audit", 3)
		t.Logf("audit: %s %s", strings.Join(auditVars, " "), strings.Join(auditArgs, " "))
		startService(t, e, "audit", auditVars, auditArgs)
	}

	e.Produce(t, 3000, orders.Mix{BadPerMille: 12, NumberedPerMille: 5})
	if c, ok := e.WaitCommitted(t, 2*time.Minute); !ok {
		t.Fatalf("the compose worker committed %d of %d orders", c, len(e.Inputs()))
	}
	rep := e.Check(t, time.Minute)
	if !rep.OK() {
		t.Fatalf("the compose worker: not exactly once: %s", rep)
	}
	t.Logf("the compose worker's configuration numbers exactly once: %s", rep)
	if auditArgs != nil {
		numbered := int64(rep.Numbered + rep.Passthrough)
		if done, ok := waitGroupCommitted(t, e, e.Input+"-audit", e.Output, numbered, 2*time.Minute); !ok {
			t.Fatalf("the compose audit consumer committed %d of %d numbered records", done, numbered)
		}
		t.Logf("the compose audit consumer's configuration audits all %d numbered records", numbered)
	}
}

func startService(t *testing.T, e *harness.Env, name string, vars, args []string) {
	t.Helper()
	p := harness.StartEnv(t, name, filepath.Join(e.LogDir(), name+".log"), vars, args...)
	// A configuration the command refuses ends it at once.
	select {
	case <-p.Done:
		t.Fatalf("the %s service exited: %v\n%s", name, p.Err, p.Stderr.String())
	case <-time.After(2 * time.Second):
	}
}

// composeVar is a variable reference in a compose file: ${NAME},
// ${NAME:-default} or ${NAME-default}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}`)

// composeInterpolate expands v as docker compose does from the shell's
// environment (no .env file): ${NAME:-default} takes the default when NAME
// is unset or empty, ${NAME-default} only when it is unset.
func composeInterpolate(v string) string {
	return composeVar.ReplaceAllStringFunc(v, func(ref string) string {
		m := composeVar.FindStringSubmatch(ref)
		val, set := os.LookupEnv(m[1])
		switch {
		case m[2] == ":-" && val == "":
			return m[3]
		case m[2] == "-" && !set:
			return m[3]
		}
		return val
	})
}

func TestComposeInterpolate(t *testing.T) {
	t.Setenv("FS_SET", "avro")
	t.Setenv("FS_EMPTY", "")
	for _, c := range []struct{ in, want string }{
		{"${FS_UNSET:-json}", "json"},
		{"${FS_SET:-json}", "avro"},
		{"${FS_EMPTY:-json}", "json"},
		{"${FS_EMPTY-json}", ""},
		{"${FS_UNSET-json}", "json"},
		{"x-${FS_SET}-y", "x-avro-y"},
		{"plain", "plain"},
	} {
		if got := composeInterpolate(c.in); got != c.want {
			t.Errorf("composeInterpolate(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
