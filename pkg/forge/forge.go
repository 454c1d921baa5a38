// Package forge is the forge (GitHub) HTTP client of the merge gate and the
// board sync, and the accounting of what it spends (docs/design.md, decision 6).
//
// A Client reads pull requests, combined statuses and issues and writes
// commit statuses through go-github, authenticated with a plain token or as a
// GitHub App installation. Its transport, which the package owns, counts
// every request it sends — each redirect hop, each retry, each answer
// whatever its status, and transport errors — by host, API (REST or GraphQL)
// and lane, the caller named in the request's context (WithLane). The counts
// are exported as forge_http_requests_total, returned by Counts, and written
// once per UTC hour as one log line:
//
//	forge HTTP: 909 requests in the hour ending 2026-09-30T15:00Z — api.github.com REST merge-gate-sweeper 812, api.github.com REST webhook 97
//
// Beyond the ADR, the Client is rate-limit aware — it learns the budget from
// the x-ratelimit-* headers of every answer, holds back a lane whose reserve
// the budget has fallen under, and turns rate-limit refusals into a
// *RateLimitError carrying when to retry — and makes GETs conditional with
// an ETag cache, since GitHub does not charge an authorized request
// answered 304 to the primary budget.
//
// An AppClient (NewApp) serves a GitHub App's many installations: it lists
// them with the App's JWT, keeps the set current from the installation
// webhooks, resolves a repository's installation, and holds one Client per
// installation, all counted by one transport whose hourly line names the
// busiest installations.
//
// The transport chain, outermost first: rate gate → auth (token,
// ghinstallation, or an AppClient installation's TokenStore token) → ETag cache → counting → User-Agent (when
// Config.UserAgent names the sender) → Config.Next. The gate sits above
// counting, so a request it holds back is not counted; it was not sent. Auth
// sits above counting, so installation-token refreshes are counted too (lane
// auth), and above the ETag cache, which keys answers by the token they were
// for.
package forge

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrInvalidConfig is wrapped by New's errors about a bad Config field.
var ErrInvalidConfig = errors.New("forge: invalid config")

// ErrNotFound is wrapped when the forge answers 404 (no such repository,
// pull request or commit, or no access to it).
var ErrNotFound = errors.New("forge: not found")

// ErrGone is wrapped when the forge answers 410 Gone: the thing asked for
// was there and was deleted, such as an issue
// (https://docs.github.com/rest/issues/issues#get-an-issue).
var ErrGone = errors.New("forge: gone")

// ErrServer reports a 5xx answer: the forge failed, not the request, and
// every replica asking now would fail alike, so a caller backs off.
var ErrServer = errors.New("forge: server error")

// DefaultBaseURL is GitHub's REST root, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.github.com/"

// DefaultETagCacheBytes is the ETag cache's bound when Config.ETagCacheBytes
// is 0: 64 MiB. Against the simulator a run's pull and combined-status
// answers take about 2.5 KB together, headers and key included, so 5,000
// open runs take about 13 MB; GitHub's own pull answers are larger (they
// embed the head and base repositories, tens of KB), where 64 MiB holds
// roughly 2,000 runs' pairs.
const DefaultETagCacheBytes = 64 << 20

// AppAuth authenticates as a GitHub App installation: installation tokens
// are minted from the App's private key through ghinstallation and refreshed
// before they expire; refreshes are charged to LaneAuth.
type AppAuth struct {
	AppID          int64
	InstallationID int64
	PrivateKey     []byte // PEM-encoded RSA key
}

// Config configures a Client. Only one of Token and App may be set; with
// neither, requests are anonymous.
type Config struct {
	// BaseURL is the REST API root: "" for https://api.github.com/, an
	// Enterprise root such as https://ghe.example.com/api/v3/, or a
	// simulator's URL. A missing trailing slash is added. GraphQL goes to
	// the endpoint beside it: its graphql, or /api/graphql beside an
	// Enterprise /api/v3/; requests there are counted as GraphQL and
	// gated on the graphql budget, all others as REST on core.
	BaseURL string
	// Token is a plain token (personal access or installation token).
	Token string
	// App authenticates as a GitHub App installation.
	App *AppAuth
	// Next sends the requests; nil: http.DefaultTransport.
	Next http.RoundTripper
	// Logger receives the hourly line; nil discards it.
	Logger *slog.Logger
	// Registerer gets forge_http_requests_total, forge_graphql_points_total,
	// forge_etag_hits_total and the rate-limit gauges
	// (forge_rate_limit_remaining, _limit and _reset_timestamp_seconds by
	// host and resource, forge_rate_limit_reserve by lane); nil: no
	// Prometheus. Clients sharing a Registerer share them: the gauges hold
	// the latest figure any of them learned.
	Registerer prometheus.Registerer
	// Now is the clock of the hourly line and of rate-limit resets; nil: time.Now.
	Now func() time.Time
	// Reserves maps a lane to the budget it leaves to others: a request on
	// that lane is held back (a *RateLimitError with CauseReserve) while the
	// remaining budget is below its reserve, until the budget resets.
	Reserves map[string]int
	// ETagCacheBytes bounds the ETag cache, in bytes of cached answers
	// (bodies, headers, keys and ETags); 0: DefaultETagCacheBytes,
	// negative: no cache (GETs are not conditional).
	ETagCacheBytes int
	// Timeout bounds each call, redirects included; 0: none beyond the context.
	Timeout time.Duration
	// UserAgent names the sender to GitHub, such as "iterion
	// (web-7f9c-3a1b2c4d)": every request's User-Agent is UserAgent
	// followed by " lane/" and its lane. "": go-github's own User-Agent.
	// It must be printable ASCII.
	UserAgent string
}

// Client is a forge client whose every request is counted. Safe for
// concurrent use; share one Client per installation or token between lanes,
// so the rate-limit figures it learns cover all of them. Call Close when done.
type Client struct {
	gh         *github.Client
	http       *http.Client
	graphqlURL string
	counting   *countingTransport
	gate       *rateGate
	// installation is the App installation an AppClient made this Client
	// for; 0 for a Client made by New.
	installation int64
}

// New validates cfg and returns a Client. Errors wrap ErrInvalidConfig and
// name the field.
func New(cfg Config) (*Client, error) {
	if cfg.Token != "" && cfg.App != nil {
		return nil, fmt.Errorf("%w: Token and App are both set; choose one", ErrInvalidConfig)
	}
	if a := cfg.App; a != nil {
		if a.AppID <= 0 {
			return nil, fmt.Errorf("%w: App.AppID %d: must be positive", ErrInvalidConfig, a.AppID)
		}
		if a.InstallationID <= 0 {
			return nil, fmt.Errorf("%w: App.InstallationID %d: must be positive", ErrInvalidConfig, a.InstallationID)
		}
	}
	base, now, parts, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	rates, err := newRateMetrics(cfg.Registerer, cfg.Reserves)
	if err != nil {
		return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
	}
	authed, err := withAuth(&cfg, parts.counted, base)
	if err != nil {
		return nil, err
	}
	return assemble(authed, parts.counting, base, now, cfg.Reserves, rates, cfg.Timeout)
}

// prepare validates the fields of cfg every client has (an AppClient's
// too: NewApp passes them in a Config) and builds the bottom of the
// transport chain: it returns the REST root, the clock and the counted
// parts.
func prepare(cfg Config) (string, func() time.Time, countedParts, error) {
	for lane, n := range cfg.Reserves {
		if lane == "" || n < 0 {
			return "", nil, countedParts{}, fmt.Errorf("%w: Reserves[%q] = %d: want a named lane and a reserve >= 0", ErrInvalidConfig, lane, n)
		}
	}
	if cfg.Timeout < 0 {
		return "", nil, countedParts{}, fmt.Errorf("%w: Timeout %v: must be >= 0", ErrInvalidConfig, cfg.Timeout)
	}
	base, err := baseURLOf(cfg.BaseURL)
	if err != nil {
		return "", nil, countedParts{}, err
	}
	if !validUserAgent(cfg.UserAgent) {
		return "", nil, countedParts{}, fmt.Errorf("%w: UserAgent %q: want printable ASCII", ErrInvalidConfig, cfg.UserAgent)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	next := cfg.Next
	if cfg.UserAgent != "" {
		next = &userAgent{next: cmp.Or[http.RoundTripper](next, http.DefaultTransport), agent: cfg.UserAgent}
	}
	parts, err := newCountedParts(next, graphqlPath(base), cfg.Logger, cfg.Registerer, now, cfg.ETagCacheBytes)
	return base, now, parts, err
}

// baseURLOf is the REST root of a Config's BaseURL, "" meaning GitHub's,
// with a trailing slash.
func baseURLOf(raw string) (string, error) {
	base := raw
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: BaseURL %q: want an absolute http(s) URL", ErrInvalidConfig, raw)
	}
	return base, nil
}

// countedParts are the bottom of a transport chain: the counting transport
// (with its hourly line and counters) and, above it, the ETag cache when
// there is one. An App's installation clients share one.
type countedParts struct {
	counting *countingTransport
	counted  http.RoundTripper // the ETag cache, or counting without one
}

func newCountedParts(next http.RoundTripper, graphql string, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time, etagBytes int) (countedParts, error) {
	if next == nil {
		next = http.DefaultTransport
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	vecs, err := newCountingVecs(reg)
	if err != nil {
		return countedParts{}, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
	}
	hits, err := newETagHitsVec(reg)
	if err != nil {
		return countedParts{}, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
	}
	counting := newCountingTransport(next, graphql, now, vecs, newHourly(logger, now()))
	parts := countedParts{counting: counting, counted: counting}
	if etagBytes == 0 {
		etagBytes = DefaultETagCacheBytes
	}
	if etagBytes > 0 {
		parts.counted = newETagCache(counting, etagBytes, hits)
	}
	return parts, nil
}

// assemble puts the rate gate over authed and makes the Client.
func assemble(authed http.RoundTripper, counting *countingTransport, base string, now func() time.Time, reserves map[string]int, rates *rateMetrics, timeout time.Duration) (*Client, error) {
	gate := newRateGate(authed, counting.graphql, now, reserves, rates) // the path counting tells GraphQL by
	hc := &http.Client{Transport: gate, Timeout: timeout}
	gh, err := github.NewClient(github.WithHTTPClient(hc), github.WithURLs(&base, nil), github.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("%w: BaseURL %q: %w", ErrInvalidConfig, base, err)
	}
	return &Client{gh: gh, http: hc, graphqlURL: graphqlURL(base), counting: counting, gate: gate}, nil
}

// Close writes the hourly line for the hour being counted, as a partial
// hour ending now; it writes nothing when no request was counted since the
// last line. The Client stays usable: later requests start a new partial hour.
func (c *Client) Close() {
	c.counting.flush()
}

// Counts is a snapshot of the requests sent since New, one entry per host,
// API, lane and status code, sorted by those fields. A Client an AppClient
// made for an installation counts that installation's requests only.
func (c *Client) Counts() []Count {
	all := c.counting.counts()
	if c.installation == 0 {
		return all
	}
	return slices.DeleteFunc(all, func(n Count) bool { return n.Installation != c.installation })
}

// RateLimits returns the latest budget figures the forge reported, one per
// resource, in no particular order.
func (c *Client) RateLimits() []RateLimit {
	return c.gate.limitsSnapshot()
}

// HTTPClient is the Client's counted, authenticated, rate-aware HTTP client,
// for forge calls the Client has no method for (GraphQL, say). Requests
// through it are counted like the Client's own; one the rate gate holds back
// fails with an error that errors.As finds a *RateLimitError in, and a
// refusal by GitHub comes back as its 403/429 answer, but for an App
// installation's request refused for its suspension, which fails with an
// error wrapping ErrSuspended.
func (c *Client) HTTPClient() *http.Client {
	return c.http
}

// Timeout is the deadline each request of c gets (Config.Timeout), or 0
// when it has none beyond its context: the longest a call can keep its
// caller waiting, when GitHub's own ServerTimeout is not shorter.
func (c *Client) Timeout() time.Duration {
	return c.http.Timeout
}

// GitHub is the go-github client over the same HTTP client, for calls the
// Client has no method for. Its built-in rate-limit check is off, the
// Client's transport does that job; its errors are go-github's (a request
// held back by the gate: errors.As finds a *RateLimitError).
func (c *Client) GitHub() *github.Client {
	return c.gh
}

// ServerTimeout is how long GitHub works on one API request before it
// stops it and answers with a timeout: 10 seconds
// (https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api#timeouts,
// https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts).
const ServerTimeout = 10 * time.Second

// RequestTimeout is the default Config.Timeout for a client serving nets
// whose shortest interval is interval: GitHub's ServerTimeout plus 5
// seconds for the answer to arrive, since waiting longer only waits for a
// request GitHub has given up on, and at most a quarter of the interval,
// so a request that never answers leaves the pass time to go on.
func RequestTimeout(interval time.Duration) time.Duration {
	return min(ServerTimeout+5*time.Second, interval/4)
}
