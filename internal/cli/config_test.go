package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
