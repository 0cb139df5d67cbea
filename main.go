// Command flakestream numbers e-commerce orders in a Kafka stream with
// reversible 64-bit snowflake numbers, exactly once, and audits them.
//
// See README.md for the commands and the guarantee, docs/ for the rest; the
// command line itself is internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flakestream/flakestream/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx, and every command shuts down
	// in order within its bound. A second one exits at once. (Not
	// signal.NotifyContext's stop, which hands the second signal back to its
	// inherited disposition: ignored, for a background job of a script.)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		fmt.Fprintf(os.Stderr, "flakestream: %s: shutting down (send it again to exit at once)\n", <-sigs)
		cancel()
		fmt.Fprintf(os.Stderr, "flakestream: %s again: exiting now\n", <-sigs)
		os.Exit(130)
	}()
	os.Exit(cli.Run(ctx, cli.App(), os.Args))
}
