package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/bindaddr"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/mongotokens"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
	"iterion.dev/iterion/pkg/server"
)

// runServe runs one replica of the merge-gate server until ctx is cancelled
// (SIGINT or SIGTERM), then shuts down gracefully and returns nil.
func runServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	return serve(ctx, args, os.Getenv, stderr)
}

// serveHelp is serve's -h: its flags by group, the measurement-only ones
// last.
var serveHelp = help{
	usage: "iterion serve --api-token TOKEN (--forge-token TOKEN | --github-app-id ID --github-private-key-file FILE [--github-installation-id ID]) [flags]",
	about: "Runs one replica of the merge-gate server: the HTTP API, webhooks, /metrics,\n" +
		"/healthz, /readyz and the pages, and the elected nets (the merge-gate sweeper, and the\n" +
		"forge board sync with --board-repos), each under its lease. Replicas sharing\n" +
		"--mongo-uri elect one of them per net. With --github-app-id and\n" +
		"--github-private-key-file but no --github-installation-id (App mode) it serves\n" +
		"every installation of the App, each swept on one shard of the lease group\n" +
		"merge-gate-sweeper. Every flag has an ITERION_* twin.",
	example: "ITERION_API_TOKEN=secret ITERION_FORGE_TOKEN=ghp_... \\\n" +
		"  iterion serve --mongo-uri mongodb://db:27017/?replicaSet=rs0 --board-repos acme/app\n",
	groups: []flagGroup{
		{"server", []string{"listen", "probe-addr", "allowed-hosts", "api-token", "api-token-file", "pages-token", "pages-token-file", "public-pages", "webhook-secret", "webhook-secret-file", "webhook-answer-within", "log-format", "log-level"}},
		{"stores", []string{"mongo-uri", "mongo-db", "store-timeout", "delivery-window"}},
		{"forge", []string{"forge-url", "forge-token", "forge-token-file", "github-app-id", "github-installation-id", "github-private-key-file", "share-installation-tokens", "forge-etag-cache", "forge-timeout"}},
		{"elected nets", []string{"sweep-interval", "sweep-time-share", "sweep-concurrency", "sweep-reserve", "board-repos", "board-interval", "board-full-sync-every", "sweep-shards", "installation-concurrency"}},
		{"HTTP limits", []string{"max-connections", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "max-header-bytes", "max-run-body-bytes", "large-webhook-reads", "large-webhook-reads-per-address", "min-webhook-body-rate", "slow-body-grace"}},
		{"for measurements only, never in production", []string{"no-lease", "sweep-mode", "sweep-no-time-budget", "forge-minute", "measure-group-shards"}},
	},
}

// serveConfig is iterion serve's configuration, from flags and their
// environment twins.
type serveConfig struct {
	listen       string
	probeAddr    string
	allowedHosts []string
	mongoURI     string
	mongoDB      string
	// mongoDBSet tells whether --mongo-db or its twin was given.
	mongoDBSet     bool
	forgeURL       string
	forgeToken     string
	appID          int64
	installationID int64
	privateKeyFile string
	privateKey     []byte // the file's PEM, read once by parseServe
	// shareTokens is --share-installation-tokens; shareTokensSet tells
	// whether the flag or its twin was given.
	shareTokens    bool
	shareTokensSet bool
	webhookSecret  string
	apiToken       string
	pagesToken     string
	publicPages    bool
	sweepInterval  time.Duration
	boardRepos     []string
	boardInterval  time.Duration
	boardFullEvery time.Duration
	sweepShards    int
	instConc       int
	timeShare      float64
	sweepConc      int
	sweepReserve   int
	noLease        bool
	sweepMode      string
	noTimeBudget   bool
	forgeMinute    time.Duration
	measureShards  int
	etagCache      int
	forgeTimeout   time.Duration
	logFormat      string
	logLevel       slog.Level
	// The *File fields name files holding a secret, as Kubernetes mounts
	// them; parseServe reads each into its secret.
	apiTokenFile      string
	pagesTokenFile    string
	webhookSecretFile string
	forgeTokenFile    string
	storeTimeout      time.Duration
	deliveryWindow    time.Duration
	// answerWithin is --webhook-answer-within.
	answerWithin time.Duration
	limits       server.Limits
}

// serveFlags declares serve's flags on fs into c; envOf maps each flag to
// its environment twin.
func serveFlags(fs *flag.FlagSet, c *serveConfig) (envOf map[string]string) {
	fs.StringVar(&c.listen, "listen", ":8080", "address to serve HTTP on, HOST:PORT or :PORT (a port number, 0 for any free one, or a service name such as http)")
	fs.StringVar(&c.probeAddr, "probe-addr", "", "address to serve /healthz, /readyz and /metrics on as well, outside --max-connections and --allowed-hosts, with a cap of its own; absent: they are served on --listen only")
	fs.Func("allowed-hosts", "host names (name or name:port,...) a request's Host may name; any other answers 421, except /healthz and /readyz. Set it with --public-pages or wherever browsers reach serve, against DNS rebinding; absent: every host", commaList(&c.allowedHosts))
	fs.StringVar(&c.mongoURI, "mongo-uri", "", "MongoDB URI of the shared run and lease stores; absent: in-memory stores (one process, which elects itself)")
	fs.StringVar(&c.mongoDB, "mongo-db", "iterion", "MongoDB database name of the stores of --mongo-uri; refused without it")
	fs.StringVar(&c.forgeURL, "forge-url", "", "forge REST API root; absent: https://api.github.com/")
	fs.StringVar(&c.forgeToken, "forge-token", "", "forge token (or use the three --github-app-* flags)")
	fs.Int64Var(&c.appID, "github-app-id", 0, "GitHub App id")
	fs.Int64Var(&c.installationID, "github-installation-id", 0, "GitHub App installation id; absent with --github-app-id: App mode, every installation of the App")
	fs.StringVar(&c.privateKeyFile, "github-private-key-file", "", "GitHub App private key (PEM) file")
	fs.BoolVar(&c.shareTokens, "share-installation-tokens", true, "App mode with --mongo-uri: the replicas share each installation's token through the collection installation_tokens, minting one an hour between them; whoever reads the collection can act as the App until a token expires. false: each replica mints its own. Refused outside App mode or without --mongo-uri")
	fs.StringVar(&c.webhookSecret, "webhook-secret", "", "secret of X-Hub-Signature-256; absent: POST /webhooks/github answers 404")
	fs.StringVar(&c.apiToken, "api-token", "", "bearer token of POST /api/runs and GET /api/runs (required); it opens the pages too")
	fs.StringVar(&c.pagesToken, "pages-token", "", "read-only token of the pages (/, /leases, /runs, /board, /installations and their JSON), as a bearer token or a basic auth password; absent: only --api-token opens them. /healthz and /metrics need no token")
	fs.BoolVar(&c.publicPages, "public-pages", false, "serve the pages without a token: they list repositories, pull requests, heads, issue titles and assignees")
	fs.DurationVar(&c.sweepInterval, "sweep-interval", server.DefaultSweepInterval, "merge-gate sweeper interval; its lease's TTL is 3 intervals, its retry 1")
	fs.Float64Var(&c.timeShare, "sweep-time-share", server.DefaultSweepTimeShare, "share (above 0, at most 1) of GitHub's GraphQL CPU-time limit, 60 s a minute, the sweeper may spend in any minute, per installation, whatever --sweep-interval is")
	fs.IntVar(&c.sweepConc, "sweep-concurrency", 1, fmt.Sprintf("batches a sweep pass may have in flight at once, per installation (1 to %d); 1: one at a time, as GitHub advises. Each needs a whole GitHub timeout (10 s) free in the time budget", server.MaxSweepConcurrency))
	fs.IntVar(&c.sweepReserve, "sweep-reserve", 0, "forge budget the merge-gate sweeper leaves to the other lanes (webhooks, POST /api/runs, the board): it sends nothing while less than this is left of the hour's REST requests or GraphQL points, per installation, until the reset; 0: none. Keep it below the budget (5,000 at least)")
	fs.Func("board-repos", "repositories owner/name,... whose issues the forge board keeps as cards (lease forge-board-sync); absent: no board", commaList(&c.boardRepos))
	fs.DurationVar(&c.boardInterval, "board-interval", board.DefaultInterval, "forge board sync interval; its lease's TTL is 3 intervals, its retry 1")
	fs.DurationVar(&c.boardFullEvery, "board-full-sync-every", board.DefaultFullEvery, "how long a board repository goes between two full syncs, which list every issue and read each stored card the list no longer shows (one request each) to remove the cards of deleted and transferred issues; at least --board-interval. Each term's first pass is a full sync too")
	fs.IntVar(&c.sweepShards, "sweep-shards", server.DefaultSweepShards, "App mode: shards of the lease groups merge-gate-sweeper and forge-board-sync; an installation is swept on shard server.InstallationShard(id, shards)")
	fs.IntVar(&c.instConc, "installation-concurrency", server.DefaultInstallationConcurrency, "App mode: installations one shard term sweeps at once (each installation's passes run one at a time)")
	fs.BoolVar(&c.noLease, "no-lease", false, "run every elected net on this replica without a lease (the forge cost scales with replicas)")
	fs.IntVar(&c.measureShards, "measure-group-shards", 0, "run the lease group measure-group of this many shards, whose work only holds its shard terms (0: none)")
	fs.StringVar(&c.sweepMode, "sweep-mode", string(server.SweepBatch), "batch: one GraphQL query per 100 runs; rest: two REST reads per run, the per-run sweep the batched one replaced (the forge cost grows with open runs)")
	fs.BoolVar(&c.noTimeBudget, "sweep-no-time-budget", false, "lift the sweeper's time budget (half of GitHub's GraphQL time a minute) and interval stop, for a harness on a compressed clock whose forge answers at once")
	fs.DurationVar(&c.forgeMinute, "forge-minute", time.Minute, "length of GitHub's minute on this replica's clock, the window of the sweeper's time budget: 1m against GitHub; a demo or harness whose forge simulator compresses its minute (forge-sim --minute) passes the same")
	fs.DurationVar(&c.forgeTimeout, "forge-timeout", 0, "deadline of each forge request; 0: GitHub's own 10 s request limit plus 5 s, at most a quarter of the shortest net interval. With --board-repos, refused unless under --board-interval")
	fs.IntVar(&c.etagCache, "forge-etag-cache", 0, "forge ETag cache bound in bytes of cached answers; 0: the default (64 MiB), negative: off")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the bearer token of POST /api/runs (instead of --api-token, which ps shows)")
	fs.StringVar(&c.pagesTokenFile, "pages-token-file", "", "file holding the pages token (instead of --pages-token)")
	fs.StringVar(&c.webhookSecretFile, "webhook-secret-file", "", "file holding the webhook secret (instead of --webhook-secret)")
	fs.StringVar(&c.forgeTokenFile, "forge-token-file", "", "file holding the forge token (instead of --forge-token)")
	fs.DurationVar(&c.storeTimeout, "store-timeout", server.DefaultStoreTimeout, "deadline of each store call a request makes; past it the request answers 503 with Retry-After")
	fs.DurationVar(&c.answerWithin, "webhook-answer-within", server.DefaultWebhookAnswerWithin, fmt.Sprintf("longest a webhook delivery waits for its answer, under GitHub's %v: one still being processed then is answered 202 and processed on", server.GitHubWebhookTimeout))
	fs.DurationVar(&c.deliveryWindow, "delivery-window", delivery.DefaultWindow, "how long a processed webhook delivery is remembered (by its signed body), so its replay is not processed again, whatever its X-GitHub-Delivery")
	d := server.DefaultLimits
	fs.IntVar(&c.limits.MaxConnections, "max-connections", d.MaxConnections, "HTTP: connections open at once; past it a new connection waits, unanswered, until one closes")
	fs.DurationVar(&c.limits.ReadHeaderTimeout, "read-header-timeout", d.ReadHeaderTimeout, "HTTP: deadline to read a request's headers")
	fs.DurationVar(&c.limits.ReadTimeout, "read-timeout", d.ReadTimeout, "HTTP: deadline to read a whole request, body included")
	fs.DurationVar(&c.limits.WriteTimeout, "write-timeout", d.WriteTimeout, "HTTP: deadline from a request's headers to the end of its answer")
	fs.DurationVar(&c.limits.IdleTimeout, "idle-timeout", d.IdleTimeout, "HTTP: how long an idle keep-alive connection stays open")
	fs.IntVar(&c.limits.MaxHeaderBytes, "max-header-bytes", d.MaxHeaderBytes, "HTTP: largest request header block, in bytes")
	fs.Int64Var(&c.limits.MaxRunBodyBytes, "max-run-body-bytes", d.MaxRunBodyBytes, "largest POST /api/runs body, in bytes; larger answers 413")
	fs.IntVar(&c.limits.LargeWebhookReads, "large-webhook-reads", d.LargeWebhookReads, "webhook bodies over 1 MiB read at once, at most --large-webhook-reads-per-address per remote address; one more waits up to --slow-body-grace, then answers 503")
	fs.IntVar(&c.limits.LargeWebhookReadsPerAddress, "large-webhook-reads-per-address", d.LargeWebhookReadsPerAddress, "of --large-webhook-reads, how many one remote address may hold; behind a proxy every delivery has the proxy's address, so raise it there (a client without the secret can then hold as many)")
	fs.Int64Var(&c.limits.MinWebhookBodyRate, "min-webhook-body-rate", d.MinWebhookBodyRate, "slowest a webhook body over 1 MiB may arrive, in bytes per second after --slow-body-grace; slower answers 408")
	fs.DurationVar(&c.limits.SlowBodyGrace, "slow-body-grace", d.SlowBodyGrace, "head start of a large webhook body before --min-webhook-body-rate applies, and its longest wait for a read slot")
	fs.StringVar(&c.logFormat, "log-format", "json", "log format on stderr: json or text")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	envOf = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		env := "ITERION_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		envOf[f.Name] = env
		f.Usage += " [$" + env + "]"
	})
	return envOf
}

// commaList sets *dst to a flag's comma-separated entries, each trimmed,
// the empty ones dropped.
func commaList(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				*dst = append(*dst, e)
			}
		}
		return nil
	}
}

// parseServe reads serve's flags, then the environment twin of each flag
// not given on the command line, and validates the result. A flag that does
// not parse stops there; otherwise the error lists every missing or invalid
// setting, each naming its flag (and the variable, when the value came from
// it). Every error but flag.ErrHelp is a usageError.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := newFlagSet("serve", serveHelp, stderr)
	envOf := serveFlags(fs, &c)
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var bad settingsError
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(envOf[f.Name])
		if given[f.Name] || v == "" {
			return
		}
		def := f.Value.String()
		if err := fs.Set(f.Name, v); err != nil {
			bad = append(bad, fmt.Errorf("$%s (--%s) %q: %w", envOf[f.Name], f.Name, v, err))
			_ = f.Value.Set(def) // a failed Set may have zeroed it: report the variable, not the zero too
		}
	})
	for _, sf := range []struct {
		flag   string
		secret *string
		file   string
	}{
		{"api-token", &c.apiToken, c.apiTokenFile},
		{"pages-token", &c.pagesToken, c.pagesTokenFile},
		{"webhook-secret", &c.webhookSecret, c.webhookSecretFile},
		{"forge-token", &c.forgeToken, c.forgeTokenFile},
	} {
		if sf.file == "" {
			continue
		}
		if *sf.secret != "" {
			bad = append(bad, fmt.Errorf("--%s (%s) and --%s-file (%s_FILE) are both set: choose one",
				sf.flag, envOf[sf.flag], sf.flag, envOf[sf.flag]))
			continue
		}
		var err error
		if *sf.secret, err = readSecretFile(sf.file); err != nil {
			bad = append(bad, fmt.Errorf("--%s-file: %w", sf.flag, err))
		}
	}
	if c.privateKeyFile != "" {
		var err error
		if c.privateKey, err = readPrivateKey(c.privateKeyFile); err != nil {
			bad = append(bad, err)
		}
	}
	c.shareTokensSet = given["share-installation-tokens"] || getenv(envOf["share-installation-tokens"]) != ""
	c.mongoDBSet = given["mongo-db"] || getenv(envOf["mongo-db"]) != ""
	bad = append(bad, c.validate()...)
	if len(bad) > 0 {
		return c, usageError{bad}
	}
	return c, nil
}

// settingsError lists every missing or invalid setting of serve, each
// naming its flag.
type settingsError []error

func (e settingsError) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d settings are missing or invalid:", len(e))
	for _, err := range e {
		b.WriteString("\n  " + err.Error())
	}
	return b.String()
}

func (e settingsError) Unwrap() []error { return e }

// readSecretFile returns the secret in path without its trailing newline,
// as a Kubernetes secret volume or an editor leaves it. An empty secret is
// an error.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(secret) == "" {
		return "", fmt.Errorf("%q is empty", path)
	}
	return secret, nil
}

// readPrivateKey returns the GitHub App's private key in path, checked
// with the parser the forge client's App transports use
// (ghinstallation's, golang-jwt's ParseRSAPrivateKeyFromPEM), so that a
// key serve cannot use is a bad setting at start, not an error once the
// stores are open. GitHub gives an App's key as a PEM file
// (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/managing-private-keys-for-github-apps).
func readPrivateKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--github-private-key-file: %w", err)
	}
	if _, err := jwt.ParseRSAPrivateKeyFromPEM(key); err != nil {
		return nil, fmt.Errorf("--github-private-key-file %q: want the App's PEM-encoded RSA private key: %w", path, err)
	}
	return key, nil
}

// validate checks the configuration once, at start, and returns every
// problem, each naming its flag. A secret whose file is set is not
// reported missing: reading the file reports it.
func (c serveConfig) validate() []error {
	var bad []error
	add := func(format string, a ...any) { bad = append(bad, fmt.Errorf(format, a...)) }
	if strings.TrimSpace(c.apiToken) == "" && c.apiTokenFile == "" {
		add("--api-token (ITERION_API_TOKEN) is required: POST /api/runs needs it")
	}
	app := c.appID != 0 || c.installationID != 0 || c.privateKeyFile != ""
	for _, f := range []struct{ flag, env, v string }{
		{"--pages-token", "ITERION_PAGES_TOKEN", c.pagesToken},
		{"--webhook-secret", "ITERION_WEBHOOK_SECRET", c.webhookSecret},
		{"--forge-token", "ITERION_FORGE_TOKEN", c.forgeToken},
	} {
		if f.v != "" && strings.TrimSpace(f.v) == "" {
			add("%s (%s) is blank: give one or none", f.flag, f.env)
		}
	}
	if (c.pagesToken != "" || c.pagesTokenFile != "") && c.publicPages {
		add("--pages-token and --public-pages are both set: choose one")
	}
	switch {
	case c.forgeToken != "" && app:
		add("--forge-token and --github-app-* are both set: choose one forge credential")
	case !app && c.forgeToken == "" && c.forgeTokenFile == "":
		add("--forge-token, or --github-app-id with --github-private-key-file (and --github-installation-id for one installation), is required")
	case app:
		if c.appID <= 0 {
			add("--github-app-id %d: want a positive App id", c.appID)
		}
		if c.installationID < 0 {
			add("--github-installation-id %d: want a positive installation id, or none for App mode (every installation)", c.installationID)
		}
		if c.privateKeyFile == "" {
			add("--github-private-key-file is required with --github-app-id")
		}
	}
	if c.shareTokensSet && !c.appMode() {
		add("--share-installation-tokens is set without App mode: only --github-app-id with --github-private-key-file and no --github-installation-id serves installations whose tokens the replicas share")
	}
	if c.sweepShards < 1 {
		add("--sweep-shards %d: want 1 or more", c.sweepShards)
	}
	if c.instConc < 1 {
		add("--installation-concurrency %d: want 1 or more", c.instConc)
	}
	if c.sweepInterval < lease.MinTTL {
		add("--sweep-interval %v: want at least %v", c.sweepInterval, lease.MinTTL)
	}
	if c.forgeMinute <= 0 {
		add("--forge-minute %v: want a positive duration (1m against GitHub)", c.forgeMinute)
	}
	if !(c.timeShare > 0 && c.timeShare <= 1) {
		add("--sweep-time-share %v: want above 0 and at most 1", c.timeShare)
	}
	if c.sweepReserve < 0 {
		add("--sweep-reserve %d: want 0 (none) or more", c.sweepReserve)
	}
	if c.sweepConc < 1 || c.sweepConc > server.MaxSweepConcurrency {
		add("--sweep-concurrency %d: want 1 to %d", c.sweepConc, server.MaxSweepConcurrency)
	}
	if c.boardInterval < lease.MinTTL {
		add("--board-interval %v: want at least %v", c.boardInterval, lease.MinTTL)
	}
	if c.boardFullEvery < c.boardInterval {
		add("--board-full-sync-every %v: want at least --board-interval, %v (every pass is then a full sync)", c.boardFullEvery, c.boardInterval)
	}
	if c.measureShards < 0 {
		add("--measure-group-shards %d: want 0 or more", c.measureShards)
	}
	if c.sweepMode != string(server.SweepBatch) && c.sweepMode != string(server.SweepREST) {
		add("--sweep-mode %q: want batch or rest", c.sweepMode)
	}
	if c.logFormat != "json" && c.logFormat != "text" {
		add("--log-format %q: want json or text", c.logFormat)
	}
	// A setting that only means something with --mongo-uri is refused
	// without it rather than ignored: its likeliest cause is a --mongo-uri
	// gone missing (an empty secret), and a replica that starts anyway
	// keeps its stores in memory and elects itself beside every other one.
	switch {
	case c.mongoURI != "":
		if problem := mongoDBNameProblem(c.mongoDB); problem != "" {
			add("--mongo-db %q: %s", c.mongoDB, problem)
		}
	case c.mongoDBSet:
		add("--mongo-db %q (ITERION_MONGO_DB) is set without --mongo-uri (ITERION_MONGO_URI): without it the stores are in memory, in no database; give both, or neither", c.mongoDB)
	}
	if c.mongoURI == "" && c.shareTokensSet && c.appMode() {
		add("--share-installation-tokens (ITERION_SHARE_INSTALLATION_TOKENS) is set without --mongo-uri (ITERION_MONGO_URI): the replicas share tokens through MongoDB, and without it each process mints its own; give both, or neither")
	}
	if c.storeTimeout <= 0 {
		add("--store-timeout %v: want a positive duration", c.storeTimeout)
	}
	if c.answerWithin <= 0 || c.answerWithin >= server.GitHubWebhookTimeout {
		add("--webhook-answer-within %v: want above 0 and under GitHub's webhook timeout, %v", c.answerWithin, server.GitHubWebhookTimeout)
	}
	if c.deliveryWindow <= 0 {
		add("--delivery-window %v: want a positive duration", c.deliveryWindow)
	}
	if c.forgeTimeout < 0 {
		add("--forge-timeout %v: want a positive duration, or 0 for the default", c.forgeTimeout)
	}
	if wait := server.SweepBatchWait(c.forgeMinute, c.forgeTimeout); c.forgeTimeout > 0 && !c.noTimeBudget && c.sweepInterval > 0 && wait >= c.sweepInterval {
		add("--forge-timeout %v: want it under --sweep-interval %v: a sweep pass begins a batch only when it would end within the interval, and one may wait %v", c.forgeTimeout, c.sweepInterval, wait)
	}
	// A board pass is cut one interval after it began (its watchdog); a
	// repository whose list fails waits for the next pass while the pass
	// goes on, which only a request deadline shorter than the pass allows.
	if len(c.boardRepos) > 0 && c.forgeTimeout > 0 && c.boardInterval > 0 && c.forgeTimeout >= c.boardInterval {
		add("--forge-timeout %v: want it under --board-interval %v: a board pass is cut one interval after it began, so a request that never answers would cost every repository after it the pass instead of failing alone", c.forgeTimeout, c.boardInterval)
	}
	for _, l := range []struct {
		flag string
		v    int64
	}{
		{"max-connections", int64(c.limits.MaxConnections)},
		{"read-header-timeout", int64(c.limits.ReadHeaderTimeout)}, {"read-timeout", int64(c.limits.ReadTimeout)},
		{"write-timeout", int64(c.limits.WriteTimeout)}, {"idle-timeout", int64(c.limits.IdleTimeout)},
		{"max-header-bytes", int64(c.limits.MaxHeaderBytes)}, {"max-run-body-bytes", c.limits.MaxRunBodyBytes},
		{"large-webhook-reads", int64(c.limits.LargeWebhookReads)},
		{"large-webhook-reads-per-address", int64(c.limits.LargeWebhookReadsPerAddress)},
		{"min-webhook-body-rate", c.limits.MinWebhookBodyRate}, {"slow-body-grace", int64(c.limits.SlowBodyGrace)},
	} {
		if l.v <= 0 {
			add("--%s %s: want a positive value", l.flag, strconv.FormatInt(l.v, 10))
		}
	}
	if c.limits.LargeWebhookReadsPerAddress > c.limits.LargeWebhookReads && c.limits.LargeWebhookReads > 0 {
		add("--large-webhook-reads-per-address %d: want at most --large-webhook-reads %d", c.limits.LargeWebhookReadsPerAddress, c.limits.LargeWebhookReads)
	}
	if c.storeTimeout > 0 && c.limits.WriteTimeout > 0 && c.limits.WriteTimeout <= c.storeTimeout {
		add("--write-timeout %v: want more than --store-timeout %v, or a slow store cuts the 503 off", c.limits.WriteTimeout, c.storeTimeout)
	}
	parsed := true
	for _, r := range c.boardRepos {
		if _, _, err := forge.ParseRepo(r); err != nil {
			add("--board-repos entry %q: want owner/name: %w", r, err)
			parsed = false
		}
	}
	if err := board.CheckRepos("--board-repos", c.boardRepos); parsed && err != nil {
		bad = append(bad, err) // a repository listed twice, in any case, which server.New would refuse after the checks
	}
	if c.forgeURL != "" {
		u, err := url.Parse(c.forgeURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--forge-url %q: want an absolute http(s) URL", c.forgeURL)
		}
	}
	if err := server.CheckAllowedHosts(c.allowedHosts); err != nil {
		add("--allowed-hosts entry %w", err)
	}
	listen, listenErr := bindaddr.Parse(c.listen)
	if listenErr != nil {
		add("--listen %q: %w", c.listen, listenErr)
	}
	if c.probeAddr != "" {
		if probe, err := bindaddr.Parse(c.probeAddr); err != nil {
			add("--probe-addr %q: %w", c.probeAddr, err)
		} else if listenErr == nil && sameSocket(probe, listen) {
			add("--probe-addr %q: want another address than --listen %q: both bind port %d of one address", c.probeAddr, c.listen, probe.Port)
		}
	}
	if err := mongoURIProblem(c.mongoURI); err != nil {
		add("--mongo-uri %q: %w", redactURI(c.mongoURI), redactErr(err, c.mongoURI))
	}
	return bad
}

// sameSocket reports whether listening on a and on b would ask for the same
// TCP socket, so the second listen fails: the same port, not 0 (each
// listener its own free port), and the same host, or either host
// unspecified ("", 0.0.0.0 or ::, which net.Listen binds on every address
// of the machine, IPv4 and IPv6 alike). It asks no DNS: localhost stands
// for 127.0.0.1, the address net.Listen takes for it (a host name's first
// IPv4 address: https://pkg.go.dev/net#Listen), and any other name is
// compared as written.
func sameSocket(a, b bindaddr.Addr) bool {
	if a.Port != b.Port || a.Port == 0 {
		return false
	}
	ha, hb := bindHost(a.Host), bindHost(b.Host)
	return ha == hb || ha == "" || hb == ""
}

// bindHost is host as sameSocket compares it: "" for an unspecified
// address, an IP address in its canonical form (an IPv4-mapped IPv6
// address as IPv4), localhost as 127.0.0.1, any other name in lower case.
func bindHost(host string) string {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" {
		return "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return name
	case ip.Unmap().IsUnspecified():
		return ""
	}
	return ip.Unmap().String()
}

// appMode reports whether serve runs in App mode: App credentials and no
// installation id, so every installation of the App is served.
func (c serveConfig) appMode() bool {
	return c.appID != 0 && c.installationID == 0
}

// forgeRequestTimeout is --forge-timeout, or when it is 0 the default
// derived from the shortest interval of the nets this replica runs.
func (c serveConfig) forgeRequestTimeout() time.Duration {
	if c.forgeTimeout > 0 {
		return c.forgeTimeout
	}
	interval := c.sweepInterval
	if len(c.boardRepos) > 0 {
		interval = min(interval, c.boardInterval)
	}
	return forge.RequestTimeout(interval)
}

// forgeHost is the host runs are recorded under: github.com for GitHub's
// API, the forge URL's host otherwise, in lower case and without its
// scheme's default port.
func (c serveConfig) forgeHost() string {
	if c.forgeURL == "" {
		return "github.com"
	}
	u, _ := url.Parse(c.forgeURL) // validate parsed it
	// Host names are case-insensitive and a scheme's default port is no
	// port (RFC 3986, 3.2.2 and 3.2.3), so https://API.GitHub.com:443/
	// keys its runs as https://api.github.com/ does.
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		host = strings.ToLower(u.Hostname())
	}
	if host == "api.github.com" {
		return "github.com"
	}
	return host
}

// serve is runServe with its environment and log sink as arguments.
func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) (rerr error) {
	c, err := parseServe(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the flags
	}
	if err != nil {
		return err
	}
	opts := &slog.HandlerOptions{Level: c.logLevel}
	var logger *slog.Logger
	if c.logFormat == "text" {
		logger = slog.New(slog.NewTextHandler(stderr, opts))
	} else {
		logger = slog.New(slog.NewJSONHandler(stderr, opts))
	}
	defer func() {
		// A stop (SIGTERM) that comes while the replica starts, say while
		// MongoDB is slow to answer, is a clean stop too, not a failure
		// of the step it cut short.
		if rerr != nil && ctx.Err() != nil && errors.Is(rerr, context.Canceled) {
			logger.Info("stopped while starting", "step", rerr.Error())
			rerr = nil
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The owner names this replica in the lease store and, through the
	// forge client's User-Agent, in GitHub's view of who sent what.
	owner := server.NewOwner()
	var runs gaterun.Store = gaterun.NewMemoryStore()
	var leases lease.Store = lease.NewMemoryStore()
	var cards board.Store         // nil: in memory
	var deliveries delivery.Store // nil: in memory
	var tokens forge.TokenStore   // nil: each AppClient its own, in memory
	if c.mongoURI != "" {
		client, db, err := connectMongo(ctx, c.mongoURI, c.mongoDB)
		if err != nil {
			return redactErr(err, c.mongoURI)
		}
		defer func() { rerr = redactErr(rerr, c.mongoURI) }() // no error of the stores quotes the password
		defer client.Disconnect(context.WithoutCancel(ctx))
		if runs, err = gaterun.NewMongoStore(ctx, db); err != nil {
			return fmt.Errorf("--mongo-uri: %w", err)
		}
		ms := mongolease.NewStore(db)
		if err := ms.CheckServer(ctx, logger); err != nil {
			return fmt.Errorf("--mongo-uri: %w", err)
		}
		leases = ms
		if deliveries, err = delivery.NewMongoStore(ctx, db, logger); err != nil {
			return fmt.Errorf("--mongo-uri: %w", err)
		}
		if len(c.boardRepos) > 0 {
			if cards, err = board.NewMongoStore(ctx, db); err != nil {
				return fmt.Errorf("--mongo-uri: %w", err)
			}
		}
		if c.appMode() && c.shareTokens {
			tokens = mongotokens.NewStore(db)
		}
	} else {
		logger.Info("no --mongo-uri: in-memory run and lease stores; this process elects itself")
	}
	fc, app, err := c.forgeClient(logger, reg, "iterion ("+owner+")", tokens)
	if err != nil {
		return err
	}

	srv, err := server.NewForComparison(server.Config{
		Runs: runs, Leases: leases, Forge: fc, App: app, ForgeHost: c.forgeHost(),
		SweepShards: c.sweepShards, InstallationConcurrency: c.instConc,
		APIToken: c.apiToken, PagesToken: c.pagesToken, PublicPages: c.publicPages, AllowedHosts: c.allowedHosts, WebhookSecret: c.webhookSecret,
		SweepInterval: c.sweepInterval, SweepTimeShare: c.timeShare, SweepConcurrency: c.sweepConc, ForgeMinute: c.forgeMinute,
		Board: cards, BoardRepos: c.boardRepos, BoardInterval: c.boardInterval, BoardFullEvery: c.boardFullEvery,
		StoreTimeout: c.storeTimeout, WebhookAnswerWithin: c.answerWithin, Deliveries: deliveries, DeliveryWindow: c.deliveryWindow, Limits: c.limits,
		Logger: logger, Registry: reg, Owner: owner,
	}, server.Comparison{NoLease: c.noLease, SweepMode: server.SweepMode(c.sweepMode), NoSweepTimeBudget: c.noTimeBudget, MeasureGroupShards: c.measureShards})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	var probes net.Listener // nil: the probes on --listen only
	if c.probeAddr != "" {
		if probes, err = net.Listen("tcp", c.probeAddr); err != nil {
			ln.Close()
			return fmt.Errorf("--probe-addr %q: %w", c.probeAddr, err)
		}
	}
	if c.publicPages && len(c.allowedHosts) == 0 {
		logger.Warn("--public-pages without --allowed-hosts: a page on any domain that rebinds its name to this replica's address can read the pages through its viewer's browser")
	}
	logger.Info("iterion serve", "owner", srv.Owner(), "forge_host", c.forgeHost(),
		"sweep_interval", c.sweepInterval.String(), "board_repos", strings.Join(c.boardRepos, ","),
		"board_interval", c.boardInterval.String(), "board_full_sync_every", c.boardFullEvery.String(), "app_mode", c.appMode(), "sweep_shards", c.sweepShards,
		"installation_concurrency", c.instConc, "sweep_time_share", c.timeShare, "sweep_concurrency", c.sweepConc, "sweep_reserve", c.sweepReserve, "forge_minute", c.forgeMinute.String(), "public_pages", c.publicPages, "allowed_hosts", strings.Join(c.allowedHosts, ","), "probe_addr", c.probeAddr, "forge_timeout", c.forgeRequestTimeout().String(), "no_lease", c.noLease, "mongo", c.mongoURI != "",
		"shared_installation_tokens", tokens != nil)
	return srv.RunWithProbes(ctx, ln, probes)
}

// forgeClient builds the forge client serve's credentials call for: a
// Client for a token or one installation, or, in App mode, an AppClient
// (the other is nil) whose installation tokens are kept in tokens (nil:
// its own, in memory), minted by userAgent's replica.
func (c serveConfig) forgeClient(logger *slog.Logger, reg prometheus.Registerer, userAgent string, tokens forge.TokenStore) (*forge.Client, *forge.AppClient, error) {
	fcfg := forge.Config{BaseURL: c.forgeURL, Token: c.forgeToken, Logger: logger, Registerer: reg, ETagCacheBytes: c.etagCache,
		Timeout: c.forgeRequestTimeout(), UserAgent: userAgent, Reserves: c.reserves()}
	if c.appID != 0 {
		key := c.privateKey
		if c.appMode() {
			app, err := forge.NewApp(forge.AppConfig{BaseURL: c.forgeURL, Logger: logger, Registerer: reg, ETagCacheBytes: c.etagCache,
				Timeout: c.forgeRequestTimeout(), UserAgent: userAgent, AppID: c.appID, PrivateKey: key, Tokens: tokens, Owner: userAgent,
				Reserves: c.reserves()})
			if err != nil {
				return nil, nil, fmt.Errorf("forge App client (--forge-url, --github-app-id, --github-private-key-file): %w", err)
			}
			return nil, app, nil
		}
		fcfg.App = &forge.AppAuth{AppID: c.appID, InstallationID: c.installationID, PrivateKey: key}
	}
	fc, err := forge.New(fcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("forge client (--forge-url, --forge-token, --github-app-*): %w", err)
	}
	return fc, nil, nil
}

// reserves is the forge clients' Config.Reserves: --sweep-reserve on the
// merge-gate sweeper's lane, nil when it is 0.
func (c serveConfig) reserves() map[string]int {
	if c.sweepReserve == 0 {
		return nil
	}
	return map[string]int{forge.LaneMergeGateSweeper: c.sweepReserve}
}

// mongoSelectTimeout bounds how long a request waits for a reachable MongoDB
// server, unless the URI sets serverSelectionTimeoutMS: the driver's 30 s
// default kept /leases and POST /api/runs hanging that long during an outage.
const mongoSelectTimeout = 5 * time.Second

// connectMongo connects to uri and checks the server answers, within 10 s.
func connectMongo(ctx context.Context, uri, dbName string) (*mongo.Client, *mongo.Database, error) {
	client, err := mongo.Connect(options.Client().SetServerSelectionTimeout(mongoSelectTimeout).ApplyURI(uri))
	if err != nil {
		return nil, nil, fmt.Errorf("--mongo-uri: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Ping(pctx, nil); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("--mongo-uri: no answer: %w", err)
	}
	return client, client.Database(dbName), nil
}

// mongoURIProblem says what makes uri no MongoDB URI serve can connect
// with, or nil when it is one or empty (no --mongo-uri): it must be
// mongodb:// or mongodb+srv://, and a mongodb:// URI must parse as the
// driver parses it at connect (hosts, ports, escapes, options' values),
// which asks no DNS. A mongodb+srv:// URI is left to the connection: its
// servers are a seed list built from DNS
// (https://www.mongodb.com/docs/manual/reference/connection-string-formats/),
// which the driver's parse looks up.
func mongoURIProblem(uri string) error {
	switch {
	case uri == "", strings.HasPrefix(uri, "mongodb+srv://"):
		return nil
	case !strings.HasPrefix(uri, "mongodb://"):
		return errors.New("want a mongodb:// or mongodb+srv:// URI")
	}
	return options.Client().ApplyURI(uri).Validate()
}

// redactURI is uri with its password, if any, replaced by "xxxxx"; a URI
// that does not parse is replaced whole, since its password cannot be told
// apart. A URI without a password is quoted as written.
func redactURI(uri string) string {
	if rawPassword(uri) == "" {
		return uri
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "<unparsable URI>"
	}
	return u.Redacted()
}

// mongoDBNameProblem says what makes name no MongoDB database name, or ""
// when it is one: it must not be empty, must be under 64 bytes and must
// hold none of / \ . space " $ nor a NUL, which MongoDB refuses on every
// platform ("MongoDB Limits and Thresholds", Naming Restrictions:
// https://www.mongodb.com/docs/manual/reference/limits/#naming-restrictions;
// a server on Windows refuses *<>:|? too, and answers so when the stores
// first write).
func mongoDBNameProblem(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "want a database name"
	case len(name) >= 64:
		return "want a database name under 64 bytes"
	case strings.ContainsAny(name, "/\\. \"$\x00"):
		return `want a database name without / \ . space " $ or NUL`
	}
	return ""
}

// redactErr returns err with the password of uri hidden wherever its
// text holds it, whole, escaped or unescaped, or any fragment of it of 3
// characters or more (a driver quotes the bad escape of a password it
// cannot parse, such as "%zz"), each replaced by "xxxxx"; errors.Is and
// errors.As still see err. The password is found without parsing uri, so
// a URI that does not parse hides its password too.
func redactErr(err error, uri string) error {
	pw := rawPassword(uri)
	if err == nil || pw == "" {
		return err
	}
	secrets := []string{pw, url.QueryEscape(pw), url.PathEscape(pw)}
	if un, uerr := url.PathUnescape(pw); uerr == nil {
		secrets = append(secrets, un)
	}
	// Every fragment, longest first, so a whole secret is replaced before
	// its pieces.
	for n := len(pw) - 1; n >= 3; n-- {
		for i := 0; i+n <= len(pw); i++ {
			secrets = append(secrets, pw[i:i+n])
		}
	}
	return redactedError{err: err, secrets: secrets}
}

// rawPassword is the password of a mongodb:// URI as written, escapes and
// all: what follows the first ":" of the user information, the text before
// the last "@" of the authority; "" when there is none.
func rawPassword(uri string) string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return ""
	}
	// The authority ends at the first "/" or "?" after the user
	// information; a "/" inside a password must be escaped, but look for
	// the last "@" first so an unescaped one hides nothing.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// redactedError is an error whose text hides secrets.
type redactedError struct {
	err     error
	secrets []string
}

func (e redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

func (e redactedError) Unwrap() error { return e.err }
