package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"gopkg.in/yaml.v3"
)

// The constructors below give every flag the same three sources besides
// the command line: FLAKESTREAM_<FLAG> (envVar) and the --config file
// (altsrc). Each flag binds into a field of its command's config struct
// (Destination), so actions read fields, not names.

// flagConfig is --config, the YAML file whose keys are flag names.
const flagConfig = "config"

// envVar is the environment variable of the flag name: FLAKESTREAM_ and
// the name in upper case with _ for -.
func envVar(name string) string {
	return "FLAKESTREAM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func stringFlag(name string, dst *string, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst})
}

func stringSliceFlag(name string, dst *cli.StringSlice, value []string, usage string) cli.Flag {
	f := &cli.StringSliceFlag{Name: name, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst}
	if value != nil {
		f.Value = cli.NewStringSlice(value...)
	}
	return altsrc.NewStringSliceFlag(f)
}

func durationFlag(name string, dst *time.Duration, value time.Duration, usage string) cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst})
}

func boolFlag(name string, dst *bool, usage string) cli.Flag {
	return boolFlagValue(name, dst, false, usage)
}

// boolFlagValue is a bool flag whose default is value. One that defaults to
// true is turned off with --name=false (or false in the environment or the
// file).
func boolFlagValue(name string, dst *bool, value bool, usage string) cli.Flag {
	return altsrc.NewBoolFlag(&cli.BoolFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst})
}

func intFlag(name string, dst *int, value int, usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: name, Value: value, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst})
}

func int64Flag(name string, dst *int64, value int64, usage string) cli.Flag {
	return altsrc.NewInt64Flag(&cli.Int64Flag{Name: name, Value: value, Usage: usage, EnvVars: []string{envVar(name)}, Destination: dst})
}

// configured adds --config to a command and loads the YAML file it names
// before the action runs, so every altsrc flag can come from the file.
func configured(cmd *cli.Command) *cli.Command {
	cmd.Flags = append([]cli.Flag{&cli.StringFlag{
		Name:    flagConfig,
		Usage:   "YAML `FILE` whose keys are flag names (flags and FLAKESTREAM_* variables override it)",
		EnvVars: []string{envVar(flagConfig)},
	}}, cmd.Flags...)
	load := altsrc.InitInputSourceWithContext(cmd.Flags, func(c *cli.Context) (altsrc.InputSourceContext, error) {
		return yamlSource(c.String(flagConfig), cmd.Name, cmd.Flags)
	})
	cmd.Before = func(c *cli.Context) error {
		if _, err := yamlSource(c.String(flagConfig), cmd.Name, cmd.Flags); err != nil {
			return err // one line, not altsrc's wrapping over three
		}
		if err := load(c); err != nil {
			// A value of the wrong type: the file's fault, as a bad flag
			// value is the command line's.
			return asUsage(fmt.Errorf("config file %s: %w", c.String(flagConfig), err))
		}
		return nil
	}
	cmd.OnUsageError = usageError
	return cmd
}

func concat(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// ignoredKeyPrefix starts the --config keys that are no flag and are
// ignored on purpose: notes, anchors for YAML aliases, settings of another
// tool that shares the file. Any other key that is no flag of the command is
// an error, so that a misspelt one is never silently dropped.
const ignoredKeyPrefix = "x-"

// yamlSource reads the --config file (none: an empty source) of command,
// whose flags are flags. Its keys are flag names: one that is not (and does
// not start with x-) is a usage error naming the nearest flag. A scalar
// given for a list flag is a one-element list, and a number or bool given
// for a string is its text, as on the command line.
func yamlSource(path, command string, flags []cli.Flag) (altsrc.InputSourceContext, error) {
	values := map[any]any{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(b, &values); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
		if err := conform(values, command, flags); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	return altsrc.NewMapInputSource(path, values), nil
}

// conform checks the keys of a --config file against the command's flags
// and turns its values, in place, into the types altsrc reads for them.
func conform(values map[any]any, command string, flags []cli.Flag) error {
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	for k, v := range values {
		name, ok := k.(string)
		if !ok {
			return asUsage(fmt.Errorf("key %v is not a flag name", k))
		}
		f, ok := byName[name]
		switch {
		case strings.HasPrefix(name, ignoredKeyPrefix):
			continue
		case !ok:
			return asUsage(fmt.Errorf("unknown key %q: no flag of %s has that name.%s (a key starting with %s is ignored)",
				name, command, didYouMean(name, flagNames(flags), ""), ignoredKeyPrefix))
		}
		switch f.(type) {
		case *altsrc.StringSliceFlag:
			list, ok := v.([]any)
			if !ok {
				list = []any{v}
			}
			for i, e := range list {
				list[i] = scalarText(e)
			}
			values[k] = list
		case *altsrc.StringFlag:
			values[k] = scalarText(v)
		}
	}
	return nil
}

// scalarText is a YAML number or bool as the text a flag would be given;
// anything else (a string, a map, a list) as it is, for altsrc to take or
// refuse.
func scalarText(v any) any {
	switch v.(type) {
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v)
	}
	return v
}
