// Command flakestream numbers e-commerce orders in a Kafka stream with
// reversible 64-bit snowflake numbers, exactly once, and audits them.
//
// See README.md for the commands, their flags and the guarantees.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func main() {
	os.Exit(run(os.Args))
}

// run is main without the exit, so tests can call it.
func run(args []string) int {
	// The first SIGINT or SIGTERM cancels ctx, and every command shuts down
	// in order within its bound. A second one exits at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "flakestream: %s: shutting down (send it again to exit at once)\n", s)
		cancel()
		if _, ok := <-sigs; ok {
			fmt.Fprintln(os.Stderr, "flakestream: second signal: exiting now")
			os.Exit(130)
		}
	}()

	err := newApp().RunContext(ctx, args)
	if err == nil {
		return 0
	}
	var ee *exitError
	code := 1
	if errors.As(err, &ee) {
		code = ee.code
	}
	fmt.Fprintf(os.Stderr, "flakestream: %v\n", err)
	return code
}

func newApp() *cli.App {
	return &cli.App{
		Name:                 "flakestream",
		Usage:                "number order events in-stream with reversible snowflake numbers, exactly once",
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		OnUsageError:         usageError,
		Commands: []*cli.Command{
			genCommand(),
			decodeCommand(),
			layoutCommand(),
			runCommand(),
			auditCommand(),
			demoCommand(),
			benchCommand(),
			replayCommand(),
		},
		// Errors are printed once, by run, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}
