package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"iterion.dev/iterion/internal/mongotest"
)

// runDevMongo serves the MongoDB-wire test server (FerretDB behind the
// serialising proxy, internal/mongotest) until ctx is cancelled (SIGINT or
// SIGTERM). Once it accepts connections it prints its URI, one line on
// stdout; it logs to stderr. Without --dir its data lives in a temporary
// directory removed on exit.
func runDevMongo(ctx context.Context, args []string) error {
	return devMongo(ctx, args, os.Stdout)
}

// devMongo is runDevMongo printing the URI to stdout.
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
