// Command dev-mongo serves the MongoDB-wire test server (FerretDB behind
// internal/testing/mongotest's fault-injecting proxy) for local runs, the demo with
// Mongo and the multi-process harness:
//
//	go run ./cmd/dev-mongo --listen ADDR [--dir DIR]
//
// Once it accepts connections it prints one line on stdout,
// mongodb://ADDR/?serverMonitoringMode=poll, and serves until SIGINT or
// SIGTERM, when it exits 0. It logs to stderr. It is a test server, not a
// production lease store: it lives apart from cmd/iterion so that the product
// binary links no test database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/testing/mongotest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := devMongo(ctx, os.Args[1:], os.Stdout)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintf(os.Stderr, "dev-mongo: %v\n", err)
	stop()
	os.Exit(1)
}

// devMongo serves the test server until ctx is cancelled, printing its URI
// to stdout once it accepts connections. Without --dir its data lives in a
// temporary directory removed on exit.
func devMongo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dev-mongo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:27017", "address to listen on (port 0: any free port)")
	dir := fs.String("dir", "", "existing directory for the data, kept on exit (default: a temporary directory, removed on exit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var srv *mongotest.Server
	var err error
	if *dir == "" {
		srv, err = mongotest.Start(startCtx, *listen, logger)
	} else {
		srv, err = mongotest.StartDir(startCtx, *listen, *dir, logger)
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, srv.URI()); err != nil {
		srv.Close()
		return err
	}
	<-ctx.Done()
	srv.Close()
	logger.Info("dev-mongo stopped")
	return nil
}
