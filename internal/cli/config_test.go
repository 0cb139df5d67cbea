package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// Every key of the example configuration files is a flag of the command the
// file is for, so the examples cannot drift from the flags.
func TestExampleConfigsUseRealFlags(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example configs: %v", err)
	}
	for _, f := range files {
		command := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if command == "worker" {
			command = "run"
		}
		t.Run(f, func(t *testing.T) {
			cmd := App().Command(command)
			if cmd == nil {
				t.Fatalf("%s: no command %q", f, command)
			}
			flags := map[string]bool{}
			for _, fl := range cmd.Flags {
				for _, n := range fl.Names() {
					flags[n] = true
				}
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var keys map[string]any
			if err := yaml.Unmarshal(b, &keys); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for k := range keys {
				if !flags[k] {
					t.Errorf("%s: key %q is not a flag of %s", f, k, command)
				}
			}
		})
	}
}

// A misspelt key is a usage error that names the nearest flag; a key
// starting with x- is ignored; a value of the wrong type is a usage error
// too.
func TestConfigKeys(t *testing.T) {
	cases := []struct {
		name, file string
		code       int
		want       string // a part of stderr, or of stdout for exit 0
	}{
		{"misspelt", "max-poll-record: 5\n", 2, `unknown key "max-poll-record": no flag of run has that name. Did you mean 'max-poll-records'? (a key starting with x- is ignored)`},
		{"far from any flag", "colour: blue\n", 2, `unknown key "colour": no flag of run has that name. (a key starting with x- is ignored)`},
		{"wrong type", "max-poll-records: lots\n", 2, "Mismatched type for flag 'max-poll-records'"},
		{"not a string key", "1: x\n", 2, "key 1 is not a flag name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runApp(t, "", nil, "run", "--config", path, "--server-id", "1", "--worker-id", "1")
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and one line with %q", code, errOut, c.code, c.want)
			}
		})
	}
	t.Run("x- keys are ignored", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("x-note: shared with the audit\nx-anchor: &bits 40\ntime-bits: 40\nsequence-bits: 13\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runApp(t, "", nil, "layout", "--config", path)
		if code != 0 || !strings.Contains(out, "40/5/5/13") {
			t.Fatalf("exit %d, stderr %q, stdout %q; want the file's 40/5/5/13", code, errOut, out)
		}
	})
}

// A scalar where a list is expected is a one-element list, and a number
// given for a list element or a string is its text, through the same
// configured() every command uses.
func TestConfigScalarAsList(t *testing.T) {
	cases := map[string][]string{
		"brokers: a:9092\n":             {"a:9092"},
		"brokers: [a:9092, b:9092]\n":   {"a:9092", "b:9092"},
		"brokers:\n  - a:9092\n  - 7\n": {"a:9092", "7"},
		"brokers: 7\n":                  {"7"},
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(file+"topic: 123\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var brokers cli.StringSlice
			var topic string
			cmd := configured(&cli.Command{
				Name:   "t",
				Flags:  []cli.Flag{stringSliceFlag("brokers", &brokers, nil, ""), stringFlag("topic", &topic, "", "")},
				Action: func(*cli.Context) error { return nil },
			})
			app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard, ExitErrHandler: func(*cli.Context, error) {}}
			if err := app.Run([]string{"x", "t", "--config", path}); err != nil {
				t.Fatal(err)
			}
			if got := brokers.Value(); !slices.Equal(got, want) || topic != "123" {
				t.Fatalf("brokers %q, topic %q; want %q, \"123\"", got, topic, want)
			}
		})
	}
}
