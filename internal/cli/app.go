// Package cli is flakestream's command line: an urfave/cli/v2 app with one
// file per command (run, audit, replay, demo, gen, decode, layout, bench)
// and its flags defined once, in shared groups (group_*.go).
//
// Every flag can be set three more ways than on the command line: a
// FLAKESTREAM_<FLAG> variable and a key of the YAML file given by --config.
// urfave/cli's altsrc resolves the precedence flag > environment > file >
// default; nothing here merges them by hand.
//
// Tests run the app in-process through [App]; main only adds the signals
// and the exit code.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/flakestream/flakestream/codec/schema"
	"github.com/flakestream/flakestream/eos"
	"github.com/flakestream/flakestream/internal/kafkaacl"
	"github.com/urfave/cli/v2"
)

// App returns the flakestream command line. Each call builds new flags and
// the structs they bind into, so two apps never share a setting.
func App() *cli.App {
	return &cli.App{
		Name:                 "flakestream",
		Usage:                "number order events in-stream with reversible snowflake numbers, exactly once",
		Version:              Version,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		OnUsageError:         usageError,
		Action:               unknownCommand,
		Commands: []*cli.Command{
			genCommand(),
			decodeCommand(),
			layoutCommand(),
			runCommand(),
			auditCommand(),
			demoCommand(),
			benchCommand(),
			replayCommand(),
			verifyCommand(),
		},
		// Errors are printed once, by Run, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
		Reader:         os.Stdin,
		Writer:         os.Stdout,
		ErrWriter:      os.Stderr,
	}
}

// Run runs app with args until it ends or ctx is cancelled, prints an error
// as one line on the app's ErrWriter, and returns the exit code: 0, 1 for a
// runtime error, 2 for a usage error, 130 for an interrupted replay. Only
// main exits.
func Run(ctx context.Context, app *cli.App, args []string) int {
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	msg := err.Error()
	if ae, ok := errors.AsType[*kafkaacl.Error](err); ok {
		// A refused right is said as itself: who, what, which operation
		// and the command that grants it, without the layers it crossed.
		msg = ae.Error()
	}
	if oe, ok := errors.AsType[*oauthRefusedError](err); ok {
		// The OIDC provider refused the client, not a broker: its answer.
		msg = "not authenticated: " + oe.Error()
	}
	fmt.Fprintf(app.ErrWriter, "flakestream: %s%s\n", msg, hint(err))
	return ExitCode(err)
}

// hint is what the user can do about err, in the flags' words, or "": the
// packages below the CLI say what failed, the CLI says which flag fixes it.
func hint(err error) string {
	switch {
	case errors.Is(err, eos.ErrMissingTopic):
		return " (create it, or pass --" + flagCreateTopics + ")"
	case errors.Is(err, eos.ErrListTopics):
		return " (check --" + flagBrokers + ", the TLS and SASL settings, and that the brokers are up)"
	}
	if se, ok := errors.AsType[*eos.SharedIDError](err); ok {
		if se.InstanceID == "" {
			return " (give each running process its own --" + flagTransactionalID + ")"
		}
		return " (give each running process its own --" + flagInstanceID + "; it defaults to the host name, which two processes on one host share)"
	}
	if re, ok := errors.AsType[*schema.RegistryError](err); ok && !re.Retryable() {
		return " (check --" + flagSchemaRegistry + " and its credentials)"
	}
	return ""
}

// ExitCode is the exit code for err: 0 for nil, the code an exit error
// carries, otherwise 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// exitError carries an exit code to main, the only place that exits.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr is a user error: exit code 2.
func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// asUsage marks err, if not nil, as a user error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 2, err: err}
}

// usageError keeps a bad flag to one line instead of the whole help text,
// with the nearest flag name when the flag is unknown.
func usageError(c *cli.Context, err error, _ bool) error {
	var hint string
	if name := undefinedFlag(err); name != "" && c != nil {
		flags := c.App.Flags
		if c.Command != nil {
			flags = append(append([]cli.Flag{}, c.Command.Flags...), flags...)
		}
		hint = didYouMean(name, flagNames(flags), "--")
	}
	return &exitError{code: 2, err: fmt.Errorf("%w (see --help)%s", err, hint)}
}
