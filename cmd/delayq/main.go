// Command delayq is the delayq server and its command line client; see
// package internal/cli for the subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/delayq/delayq/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM starts a graceful shutdown; stop() then
	// restores the default action, so a second one kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
