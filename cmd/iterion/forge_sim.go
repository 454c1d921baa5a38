package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"iterion.dev/iterion/internal/bindaddr"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// latencyFlags names the flag of each forgesim.Latency field.
var latencyFlags = map[string]string{
	"RESTDefault": "latency-rest", "RESTPage": "latency-rest-page", "GraphQLBase": "latency-graphql",
	"GraphQLPerNode": "latency-graphql-node", "Tail": "latency-timeouts", "BadGatewayShare": "latency-502-share",
}

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

// notFromABrowser serves h to the programs forge-sim is for (serve, the
// harness, curl, none of which sends Origin) and answers 403 to what only
// a web page makes a browser send. A page on any site may POST to
// 127.0.0.1 with a text/plain body, which the control API reads as JSON
// (a cross-site request forgery: a new webhook URL, budgets, installations),
// and the browser names the page's origin in Origin
// (https://fetch.spec.whatwg.org/#origin-header). A page whose own name
// was rebound to 127.0.0.1 reads the answers as its own, and names that
// name in Host: only an IP address or localhost is served.
func notFromABrowser(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if name, _, err := net.SplitHostPort(host); err == nil {
			host = name
		}
		switch {
		case r.Header.Get("Origin") != "":
			http.Error(w, "forge-sim: a request with Origin comes from a web page; refused", http.StatusForbidden)
		case host != "localhost" && net.ParseIP(strings.Trim(host, "[]")) == nil:
			http.Error(w, fmt.Sprintf("forge-sim: Host %q is not an IP address or localhost; refused", host), http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// serveForgeSim is runForgeSim writing its URL to stdout and its log to stderr.
func serveForgeSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("forge-sim", forgeSimHelp, stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	budget := fs.Int("budget", forgesim.DefaultBudget, "requests each token may make per hour, per resource (requests without a token: 60 per client IP address, or this when lower)")
	tokenTTL := fs.Duration("token-ttl", forgesim.DefaultTokenTTL, "lifetime of minted installation tokens")
	minute := fs.Duration("minute", time.Minute, "length of the simulator's minute, the window of its per-minute secondary limits (a harness compressing a minute into an interval passes the interval)")
	noSecondary := fs.Bool("no-secondary-limits", false, "switch GitHub's secondary limits off, the CPU-time limit included (for scenarios that measure something else; say so)")
	gh := forgesim.GitHubLatency()
	latencyOn := fs.Bool("latency", false, "answer as slowly as GitHub: the latency model, its times scaled by --minute (off: every answer is instant)")
	seed := fs.Uint64("latency-seed", 0, "seed of the latency model's draws")
	restTime := fs.Duration("latency-rest", gh.RESTDefault, "median time of a REST answer")
	pageTime := fs.Duration("latency-rest-page", gh.RESTPage, "median time of a REST page (the issues list)")
	gqlBase := fs.Duration("latency-graphql", gh.GraphQLBase, "median time of a GraphQL query asking for no nodes")
	gqlNode := fs.Duration("latency-graphql-node", gh.GraphQLPerNode, "what each node a GraphQL query asks for adds to its median")
	timeouts := fs.Float64("latency-timeouts", 0.02, "share of 100-node GraphQL queries whose time passes GitHub's 10 s timeout: sets the heavy tail (0: no tail, every answer its median)")
	badGateway := fs.Float64("latency-502-share", gh.BadGatewayShare, "share of timed-out GraphQL queries answered 502 rather than 504")
	perQuery := fs.Bool("latency-per-query", false, "draw each GraphQL query's time from the seed, the query and how many times its installation sent it before, not in the order all requests arrive: runs that send the same queries meet the same times and timeouts (a harness comparing replica counts)")
	var faults forgesim.GraphQLFaults
	fs.Float64Var(&faults.BadGatewayShare, "graphql-502-share", 0, "share of GraphQL queries answered 502 after they ran (charged, no data), apart from the latency model's timeouts; POST /_sim/faults changes it")
	fs.Uint64Var(&faults.Seed, "graphql-fault-seed", 0, "seed of the injected GraphQL faults' draws")
	var gqlAnswer forgesim.GraphQLLimitAnswer
	fs.Var(&gqlAnswer, "graphql-limit-answer", `how GraphQL requests over a rate limit are answered: "mixed" (primary 200 with RATE_LIMITED, secondary 403), "200" or "403"`)
	var size forgesim.InstallationSize
	fs.IntVar(&size.Repositories, "installation-repos", 0, "repositories of every installation: scales its budget by GitHub's rule (0 with --installation-users 0: the flat --budget)")
	fs.IntVar(&size.Users, "installation-users", 0, "users of every installation's organization: scales its budget by GitHub's rule")
	fs.BoolVar(&size.EnterpriseCloud, "enterprise-cloud", false, "installations are on GitHub Enterprise Cloud: 15,000 REST requests and 10,000 GraphQL points an hour")
	installations := fs.Int("installations", 0, "start with the App installed N times: installations 1..N, installation i on account org-<i>")
	perInstallation := fs.Int("repos-per-installation", 0, "repositories each of the --installations owns: org-<i>/repo-1 .. org-<i>/repo-<R>")
	var hook forgesim.Webhook
	fs.StringVar(&hook.URL, "webhook-url", "", "send installation and installation_repositories webhooks here when installations or their repositories change through the control API (the installations it starts with send none)")
	fs.StringVar(&hook.Secret, "webhook-secret", "", "secret the webhooks are signed with (X-Hub-Signature-256)")
	fs.Int64Var(&hook.AppID, "app-id", 1, "the App the installations belong to, as webhooks name it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := bindaddr.Parse(*listen); err != nil {
		return usageError{fmt.Errorf("--listen %q: %w", *listen, err)}
	}
	if *installations < 0 {
		return usageError{fmt.Errorf("--installations %d: must be >= 0", *installations)}
	}
	if *perInstallation < 0 {
		return usageError{fmt.Errorf("--repos-per-installation %d: must be >= 0", *perInstallation)}
	}
	if *perInstallation > 0 && *installations == 0 {
		return usageError{fmt.Errorf("--repos-per-installation %d: needs --installations", *perInstallation)}
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
	if *timeouts < 0 || *timeouts >= 0.5 {
		return usageError{fmt.Errorf("--latency-timeouts %v: must be within 0 and 0.5", *timeouts)}
	}
	if err := faults.Validate(); err != nil {
		return usageError{fmt.Errorf("--graphql-502-share: %w", err)}
	}
	if size.Repositories < 0 || size.Users < 0 {
		return usageError{fmt.Errorf("--installation-repos %d, --installation-users %d: must be >= 0", size.Repositories, size.Users)}
	}
	limits := forgesim.GitHubSecondaryLimits
	if *noSecondary {
		limits = forgesim.SecondaryLimits{}
	}
	opts := []forgesim.Option{forgesim.WithBudget(*budget), forgesim.WithTokenTTL(*tokenTTL),
		forgesim.WithMinute(*minute), forgesim.WithSecondaryLimits(limits), forgesim.WithGraphQLLimitAnswer(gqlAnswer),
		forgesim.WithGraphQLFaults(faults)}
	// The model is checked whether or not --latency turns it on, so a bad
	// --latency-* value is named even where it would have no effect.
	l := forgesim.Latency{
		RESTPage:        *pageTime,
		RESTDefault:     *restTime,
		GraphQLBase:     *gqlBase,
		GraphQLPerNode:  *gqlNode,
		Tail:            forgesim.TailFor(*gqlBase+100**gqlNode, *timeouts),
		BadGatewayShare: *badGateway,
		Seed:            *seed,
		PerQuery:        *perQuery,
	}
	if err := l.Validate(); err != nil {
		var fe *forgesim.FieldError
		if errors.As(err, &fe) {
			return usageError{fmt.Errorf("--%s: %w", cmp.Or(latencyFlags[fe.Field], "latency"), err)}
		}
		return usageError{fmt.Errorf("--latency: %w", err)}
	}
	if *latencyOn {
		opts = append(opts, forgesim.WithLatency(l))
	}
	if size != (forgesim.InstallationSize{}) {
		opts = append(opts, forgesim.WithInstallationSize(size))
	}
	sim := forgesim.New(opts...)
	if err := sim.SeedInstallations(*installations, *perInstallation); err != nil {
		return fmt.Errorf("--installations: %w", err)
	}
	if err := sim.SetWebhook(hook); err != nil {
		var fe *forgesim.FieldError
		if errors.As(err, &fe) && fe.Field == "app_id" {
			return usageError{fmt.Errorf("--app-id: %w", err)}
		}
		return usageError{fmt.Errorf("--webhook-url: %w", err)}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	// Every request's context ends when the shutdown begins, so that the
	// latency model's waits end at once, unanswered, rather than hold the
	// shutdown past its deadline.
	requests, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := &http.Server{
		Handler:           notFromABrowser(sim),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return requests },
	}
	srv.RegisterOnShutdown(endRequests)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	logger.Info("forge-sim listening", "url", "http://"+ln.Addr().String(), "budget", *budget, "minute", *minute,
		"secondary_limits", !*noSecondary, "installations", *installations, "latency", *latencyOn, "graphql_limit_answer", gqlAnswer.String())
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
