// Command dev-mongo serves the MongoDB-wire test server (FerretDB behind
// internal/testing/mongotest's fault-injecting proxy) for local runs, the demo with
// Mongo and the multi-process harness:
//
//	go run ./cmd/dev-mongo --listen ADDR [--dir DIR]
//
// Once it accepts connections it prints one line on stdout,
// mongodb://ADDR/?serverMonitoringMode=poll, and serves until SIGINT or
// SIGTERM, when it exits 0. A bad flag, a stray argument, an --listen
// that is no HOST:PORT or a --dir that is no existing directory exits 2,
// naming the flag, before anything starts; any later error exits 1. It
// logs to stderr. It is a test server, not a
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

	"iterion.dev/iterion/internal/bindaddr"
	"iterion.dev/iterion/internal/testing/mongotest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code := exitCode(os.Stderr, devMongo(ctx, os.Args[1:], os.Stdout)); code != 0 {
		stop()
		os.Exit(code)
	}
}

// exitCode is the process's exit status for devMongo's result: 0 for
// success and -h, 2 for a usage error (as Go's flag package exits), 1 for
// any other; it writes "dev-mongo: ERR" to w for those two. The flag
// package has printed its own error and the flags already.
func exitCode(w io.Writer, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "dev-mongo: %v\n", err)
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

// usageError is a bad command line: a flag that does not parse, a stray
// argument, a bad --listen or --dir. It exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// devMongo serves the test server until ctx is cancelled, printing its URI
// to stdout once it accepts connections. Without --dir its data lives in a
// temporary directory removed on exit.
func devMongo(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dev-mongo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:27017", "address to listen on (port 0: any free port)")
	dir := fs.String("dir", "", "existing directory for the data, kept on exit (default: a temporary directory, removed on exit)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if _, err := bindaddr.Parse(*listen); err != nil {
		return usageError{fmt.Errorf("--listen %q: %w", *listen, err)}
	}
	if *dir != "" {
		if fi, err := os.Stat(*dir); err != nil {
			return usageError{fmt.Errorf("--dir %q: want an existing directory: %w", *dir, err)}
		} else if !fi.IsDir() {
			return usageError{fmt.Errorf("--dir %q: want an existing directory, not a file", *dir)}
		}
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
