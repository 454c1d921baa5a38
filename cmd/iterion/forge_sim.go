package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// runForgeSim serves the GitHub simulator until ctx is cancelled (SIGINT or
// SIGTERM). Once it listens it prints its URL, one line on stdout; a forge
// client's BaseURL is that URL plus "/".
func runForgeSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return serveForgeSim(ctx, args, stdout, stderr)
}

// forgeSimHelp is forge-sim's -h.
var forgeSimHelp = help{
	usage: "iterion forge-sim [flags]",
	about: "Serves the GitHub simulator (REST, GraphQL, App tokens, rate limits) until\n" +
		"interrupted, and prints its URL, one line on stdout. Point serve's --forge-url\n" +
		"at that URL plus \"/\".",
	example: "iterion forge-sim --listen 127.0.0.1:9000 --budget 5000",
}

// serveForgeSim is runForgeSim writing its URL to stdout and its log to stderr.
func serveForgeSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("forge-sim", forgeSimHelp, stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	budget := fs.Int("budget", forgesim.DefaultBudget, "requests each token may make per hour, per resource")
	tokenTTL := fs.Duration("token-ttl", forgesim.DefaultTokenTTL, "lifetime of minted installation tokens")
	minute := fs.Duration("minute", time.Minute, "length of the simulator's minute, the window of its per-minute secondary limits (a harness compressing a minute into an interval passes the interval)")
	noSecondary := fs.Bool("no-secondary-limits", false, "switch GitHub's secondary limits off (for scenarios that measure something else; say so)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *budget < 0 {
		return usageError{fmt.Errorf("--budget %d: must be >= 0", *budget)}
	}
	if *tokenTTL <= 0 {
		return usageError{fmt.Errorf("--token-ttl %v: must be positive", *tokenTTL)}
	}
	if *minute <= 0 {
		return usageError{fmt.Errorf("--minute %v: must be positive", *minute)}
	}
	limits := forgesim.GitHubSecondaryLimits
	if *noSecondary {
		limits = forgesim.SecondaryLimits{}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	srv := &http.Server{
		Handler: forgesim.New(forgesim.WithBudget(*budget), forgesim.WithTokenTTL(*tokenTTL),
			forgesim.WithMinute(*minute), forgesim.WithSecondaryLimits(limits)),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	logger.Info("forge-sim listening", "url", "http://"+ln.Addr().String(), "budget", *budget, "minute", *minute, "secondary_limits", !*noSecondary)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("forge-sim stopped")
	return nil
}
