package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// flagTable is one line per (command, flag): the flag's name, its
// FLAKESTREAM_* variable and its default, with the host name and
// GOMAXPROCS, which depend on the machine, as placeholders.
func flagTable(t *testing.T) []string {
	t.Helper()
	host, _ := os.Hostname()
	var lines []string
	for _, cmd := range App().Commands {
		for _, fl := range cmd.Flags {
			df, ok := fl.(cli.DocGenerationFlag)
			if !ok {
				t.Fatalf("%s --%s: no environment or default to show", cmd.Name, fl.Names()[0])
			}
			def := df.GetValue()
			if host != "" {
				def = strings.ReplaceAll(def, host, "<hostname>")
			}
			if bf, ok := fl.(*altsrc.BoolFlag); ok && bf.Value {
				def = "true" // urfave/cli shows no default for a bool; one that defaults to true is pinned as such
			}
			if fl.Names()[0] == flagParallelism && def == fmt.Sprint(runtime.GOMAXPROCS(0)) {
				def = "<GOMAXPROCS>"
			}
			lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%s", cmd.Name, fl.Names()[0], strings.Join(df.GetEnvVars(), ","), def))
		}
	}
	sort.Strings(lines)
	return lines
}

// Users depend on every flag name, FLAKESTREAM_* variable and default:
// testdata/flags.golden pins them. It was written from the command line as
// it was before the move to internal/cli, with the variables that demo,
// bench and --json lacked added (and --config for demo and bench). A
// change to it is a change users see: make it on purpose.
func TestFlagsGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/flags.golden")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	got := flagTable(t)
	wantSet := map[string]bool{}
	for _, l := range want {
		wantSet[l] = true
	}
	gotSet := map[string]bool{}
	for _, l := range got {
		gotSet[l] = true
		if !wantSet[l] {
			t.Errorf("new or changed: %q", l)
		}
	}
	for _, l := range want {
		if !gotSet[l] {
			t.Errorf("gone or changed: %q", l)
		}
	}
}

// `flakestream <command> --help` shows the FLAKESTREAM_* variable of every
// flag of every command.
func TestHelpShowsEveryVariable(t *testing.T) {
	for _, cmd := range App().Commands {
		t.Run(cmd.Name, func(t *testing.T) {
			out, errOut, code := runApp(t, "", nil, cmd.Name, "--help")
			if code != 0 {
				t.Fatalf("--help: exit %d: %s", code, errOut)
			}
			for _, fl := range cmd.Flags {
				name := fl.Names()[0]
				if !strings.Contains(out, "--"+name+" ") || !strings.Contains(out, "$"+envVar(name)+"]") {
					t.Errorf("--help does not show --%s with $%s:\n%s", name, envVar(name), out)
				}
			}
		})
	}
}

// levels are the values one flag is set to in the file, the environment
// and on the command line, in that order, for each kind of flag, each as
// written there and as the command then reads it; a bool goes true, false,
// true so that each level is told from the one below.
func levels(fl cli.Flag) (file, env, arg [2]string, ok bool) {
	switch f := fl.(type) {
	case *altsrc.StringFlag:
		return [2]string{`"file"`, "file"}, [2]string{"env", "env"}, [2]string{"arg", "arg"}, true
	case *altsrc.StringSliceFlag:
		return [2]string{`["file"]`, "[file]"}, [2]string{"env", "[env]"}, [2]string{"arg", "[arg]"}, true
	case *altsrc.IntFlag, *altsrc.Int64Flag:
		return [2]string{"7", "7"}, [2]string{"8", "8"}, [2]string{"9", "9"}, true
	case *altsrc.DurationFlag:
		return [2]string{"7s", "7s"}, [2]string{"8s", "8s"}, [2]string{"9s", "9s"}, true
	case *altsrc.BoolFlag:
		if f.Value { // defaults to true: false, true, false, so that the file's level is told from the default
			return [2]string{"false", "false"}, [2]string{"true", "true"}, [2]string{"false", "false"}, true
		}
		return [2]string{"true", "true"}, [2]string{"false", "false"}, [2]string{"true", "true"}, true
	}
	return [2]string{}, [2]string{}, [2]string{}, false
}

// Every flag of every command but --config itself can be set by the YAML
// file, by its FLAKESTREAM_* variable and on the command line, with the
// precedence flag > environment > file. Each level is checked for every
// flag at once, in the bound value the command reads.
func TestEveryFlagFromFileEnvAndArgs(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range App().Commands {
		var names []string
		var yaml strings.Builder
		for _, fl := range cmd.Flags {
			name := fl.Names()[0]
			if name == flagConfig {
				continue
			}
			file, _, _, ok := levels(fl)
			if !ok {
				t.Fatalf("%s --%s (%T) cannot come from the YAML file", cmd.Name, name, fl)
			}
			names = append(names, name)
			fmt.Fprintf(&yaml, "%s: %s\n", name, file[0])
		}
		cfgFile := filepath.Join(dir, cmd.Name+".yaml")
		if err := os.WriteFile(cfgFile, []byte(yaml.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, level := range []string{"file", "env", "arg"} {
			t.Run(cmd.Name+"/"+level, func(t *testing.T) {
				app := App()
				app.Writer, app.ErrWriter = io.Discard, io.Discard
				c := app.Command(cmd.Name)
				args := []string{"flakestream", cmd.Name, "--config", cfgFile}
				want := map[string]string{}
				for _, fl := range c.Flags {
					name := fl.Names()[0]
					if name == flagConfig {
						continue
					}
					file, env, arg, _ := levels(fl)
					want[name] = file[1]
					if level != "file" {
						t.Setenv(envVar(name), env[0])
						want[name] = env[1]
					}
					if level == "arg" {
						args = append(args, "--"+name+"="+arg[0])
						want[name] = arg[1]
					}
				}
				var got map[string]string
				c.Action = func(ctx *cli.Context) error {
					got = map[string]string{}
					for _, name := range names {
						v := ctx.Value(name)
						if s, ok := v.(cli.StringSlice); ok {
							v = s.Value()
						}
						got[name] = fmt.Sprint(v)
					}
					return nil
				}
				if err := app.Run(args); err != nil {
					t.Fatal(err)
				}
				for _, name := range names {
					if g, w := got[name], want[name]; g != w {
						t.Errorf("--%s = %q, want %q (from the %s)", name, g, w, level)
					}
				}
			})
		}
	}
}
