// Command flakestream numbers e-commerce orders in a Kafka stream with
// reversible 64-bit snowflake numbers, exactly once, and audits them.
//
// See README.md for the commands, their flags and the guarantees; the
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
	// in order within its bound. stop then restores the default handling,
	// so a second signal ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		fmt.Fprintln(os.Stderr, "flakestream: shutting down (send the signal again to exit at once)")
	}()
	os.Exit(cli.Run(ctx, cli.App(), os.Args))
}
