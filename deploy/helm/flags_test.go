package helm

import (
	"sort"
	"strings"
	"testing"
)

// flag is one row of internal/cli/testdata/flags.golden.
type flag struct{ env, def string }

// readGolden reads the CLI's pinned flags: command -> flag name -> its
// variable and default.
func readGolden(t *testing.T) map[string]map[string]flag {
	t.Helper()
	out := map[string]map[string]flag{}
	for i, line := range strings.Split(strings.TrimSpace(string(readRepoFile(t, "internal/cli/testdata/flags.golden"))), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("flags.golden:%d: %d fields, want 4", i+1, len(f))
		}
		if out[f[0]] == nil {
			out[f[0]] = map[string]flag{}
		}
		out[f[0]][f[1]] = flag{env: f[2], def: f[3]}
	}
	return out
}

// TestFlagsExist: every flag the chart hands flakestream, as an argument,
// a key of a --config file or a FLAKESTREAM_* variable, is one the command
// has in internal/cli/testdata/flags.golden. A misspelled or removed flag
// would otherwise be ignored (the file and the environment) or stop the
// pod (an argument).
func TestFlagsExist(t *testing.T) {
	golden := readGolden(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := render(t, vs.values())
			pods := workloadPods(r)
			if len(pods) == 0 {
				t.Fatal("no workloads")
			}
			for name, pod := range pods {
				for _, c := range pod.Containers {
					if len(c.Command) > 0 {
						t.Errorf("%s %s: command %q replaces the image's entrypoint", name, c.Name, c.Command)
					}
					if len(c.Args) == 0 {
						t.Fatalf("%s %s: no args, so no command", name, c.Name)
					}
					cmd := c.Args[0]
					flags, ok := golden[cmd]
					if !ok {
						t.Fatalf("%s %s: %q is not a flakestream command", name, c.Name, cmd)
					}
					envs := map[string]bool{}
					for _, f := range flags {
						envs[f.env] = true
					}
					for _, a := range c.Args[1:] {
						if !strings.HasPrefix(a, "--") {
							continue
						}
						n, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
						if _, ok := flags[n]; !ok {
							t.Errorf("%s %s: flakestream %s has no flag --%s", name, c.Name, cmd, n)
						}
					}
					file, cfg := configFile(t, r, pod, c)
					keys := make([]string, 0, len(cfg))
					for k := range cfg {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						if _, ok := flags[k]; !ok {
							t.Errorf("%s: flakestream %s has no flag --%s", file, cmd, k)
						}
					}
					for _, e := range c.Env {
						if strings.HasPrefix(e.Name, "FLAKESTREAM_") && !envs[e.Name] {
							t.Errorf("%s %s: flakestream %s reads no %s", name, c.Name, cmd, e.Name)
						}
					}
				}
			}
		})
	}
}

func sameSet(a, b []string) bool {
	return strings.Join(sorted(a), ",") == strings.Join(sorted(b), ",")
}

func sorted(a []string) []string {
	out := append([]string(nil), a...)
	sort.Strings(out)
	return out
}
