// Package forgesim is a GitHub simulator: the REST endpoints the forge
// client uses, with GitHub's JSON shapes, an hourly budget per installation
// or user with GitHub's x-ratelimit-* headers and 403s, per-token ETags and
// free authorized 304s, and GitHub's secondary rate limits (secondary.go),
// plus injected ones on demand. It counts every request it receives, by token,
// method, route and status: the ground truth that tests and benchmarks
// compare the client's own counts against.
//
// By default every answer is instant. WithLatency turns on a latency model
// (latency.go): each answer takes GitHub's time, waited on the simulator's
// own clock and scaled by its minute, and with it come the rules that
// depend on time: GitHub's 10 s timeouts, GraphQL's and REST's, and its
// CPU-time secondary limit (timing.go). WithGraphQLLimitAnswer picks the shape of a GraphQL
// refusal (graphql_limits.go); WithInstallationSize scales installation
// budgets by GitHub's rule (installations.go). A commit takes at most
// MaxStatuses statuses of one context.
//
// A GitHub App's installations (apps.go) each cover repositories and spend
// their own budgets; adding, removing, suspending or unsuspending them, or
// changing their repositories, sends GitHub's installation webhooks,
// signed, to a configured URL. The request
// log (requestlog.go) keeps, per installation and per sender (the
// User-Agent), each interval's requests made with the installation's
// tokens and when the first and last arrived: who swept which installation
// when, seen from GitHub's side.
//
// A Sim is an http.Handler: serve it with httptest.NewServer in process, or
// run "iterion forge-sim". It serves the API at its root (/repos/...), so a
// client's base URL is the server's URL plus "/". Control endpoints under
// /_sim/ seed repositories, pull requests, statuses and issues, change the
// budget and the clock, and read the counts; each has an in-process twin
// method. Any token is accepted; its budget is its principal's
// (principalOf). A request without a token spends its client IP address's
// budget (clientPrincipal), and GraphQL refuses it 401, as GitHub does.
//
// Endpoints (GitHub's):
//
//	GET  /repos/{owner}/{repo}/pulls/{number}
//	GET  /repos/{owner}/{repo}/commits/{ref}/status   (ref: a SHA, a branch or a tag)
//	POST /repos/{owner}/{repo}/statuses/{sha}
//	GET  /repos/{owner}/{repo}/issues                 (state, since, sort, direction, per_page, page)
//	GET  /repos/{owner}/{repo}/issues/{number}        (301 when transferred, 410 when deleted: TransferIssue, DeleteIssue)
//	POST /app/installations/{id}/access_tokens        (needs an App JWT)
//	GET  /app/installations                           (needs an App JWT; per_page, page)
//	GET  /app/installations/{id}                      (needs an App JWT)
//	GET  /repos/{owner}/{repo}/installation           (needs an App JWT)
//	POST /graphql                                     (a subset of GitHub's schema, priced as GitHub does: graphql.go)
//
// Their answers carry every field GitHub's OpenAPI description marks
// required (shapes.go), and owner and repository names match without regard
// to case, as on GitHub.
//
// Control endpoints (the simulator's; no budget, no rate-limit headers):
//
//	POST /_sim/repos/{owner}/{repo}/pulls                  {"number":12,"head_sha":"…","state":"open","title":"…"}
//	POST /_sim/repos/{owner}/{repo}/pulls/{number}/head    {"head_sha":"…"}
//	POST /_sim/repos/{owner}/{repo}/pulls/{number}/close
//	POST /_sim/repos/{owner}/{repo}/pulls/{number}/merge
//	POST /_sim/repos/{owner}/{repo}/statuses/{sha}         {"context":"…","state":"success","description":"…","target_url":"…"}
//	POST /_sim/repos/{owner}/{repo}/issues                 {"number":3,"title":"…","state":"open","labels":["…"],"assignees":["…"]}
//	DELETE /_sim/repos/{owner}/{repo}/issues/{number}      (DeleteIssue: its GET answers 410)
//	POST /_sim/repos/{owner}/{repo}/issues/{number}/transfer {"repository":"owner/name"} → {"repository":…,"number":N} (TransferIssue: its GET answers 301)
//	POST /_sim/budget                                      {"limit":5000,"token":"…"} (the token's principal; no token: the default for all)
//	POST /_sim/tokens                                      {"token":"…","user":"…"} (MapToken)
//	POST /_sim/repos/{owner}/{repo}/refs                   {"ref":"heads/main","sha":"…"} (SetRef)
//	POST /_sim/clock/advance                               {"duration":"1h"}
//	POST /_sim/hour/reset                                  every token's budget window restarts now
//	POST /_sim/secondary                                   {"token":"…","retry_after_seconds":60,"count":1}
//	POST /_sim/installations                               {"id":7,"account":"acme","repositories":["acme/app"]}, or {"installations":N,"repos_per_installation":R}
//	DELETE /_sim/installations/{id}
//	POST /_sim/installations/{id}/repos                    {"add":["acme/web"]} or {"remove":["acme/app"]}
//	POST /_sim/installations/{id}/suspend                  (SuspendInstallation: mints refused 403, suspended_at set)
//	POST /_sim/installations/{id}/unsuspend                (UnsuspendInstallation)
//	POST /_sim/installations/{id}/refuse-mints             {"refuse":true} or {"refuse":false} (RefuseMints: mints refused 403, not suspended)
//	GET  /_sim/installations                               the installations as JSON
//	GET  /_sim/installations/requests                      RequestLog as JSON (since=RFC 3339, installation=ID)
//	POST /_sim/webhook                                     {"url":"…","secret":"…","app_id":1} (where installation webhooks go)
//	GET  /_sim/stats                                       Stats as JSON
//	POST /_sim/stats/reset
//	GET  /_sim/reads?principal=…                           when each pull request was read (Reads)
//	POST /_sim/faults                                      {"bad_gateway_share":0.01,"seed":1} (SetGraphQLFaults)
//	ANY  /_sim/redirect/{hops}/{path...}                   307 to …/{hops-1}/{path}, then to /{path}
//
// A malformed control body answers 400 with {"message":…,"field":…} naming
// the field.
package forgesim

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// DefaultBudget is the requests a token may make per hour unless WithBudget
// or SetBudget says otherwise: GitHub's figure for a personal token.
const DefaultBudget = 5000

// AnonymousBudget is the requests unauthenticated clients may make per
// hour: "The primary rate limit for unauthenticated requests is 60 requests
// per hour" ("Rate limits for the REST API", Primary rate limit for
// unauthenticated users:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#primary-rate-limit-for-unauthenticated-users).
// Like GitHub, the simulator keeps one per client IP address
// (clientPrincipal).
const AnonymousBudget = 60

// DefaultTokenTTL is how long a minted installation token lives, as on GitHub.
const DefaultTokenTTL = time.Hour

// Option configures a Sim.
type Option func(*Sim)

// WithClock sets the simulator's clock (default time.Now); Advance moves the
// simulator's time ahead of it.
func WithClock(now func() time.Time) Option {
	return func(s *Sim) { s.now = now }
}

// WithJWTTimes has the simulator refuse an App JWT whose times GitHub
// refuses, on the simulator's clock (jwtTimeRefusal): an iat in the
// future, an exp in the past or more than 10 minutes ahead, each 401 with
// GitHub's message. Off by default: the tests that move the simulator's
// clock (WithClock, Advance) away from the client's would otherwise see
// every JWT refused.
func WithJWTTimes() Option {
	return func(s *Sim) { s.jwtTimes = true }
}

// WithBudget sets the requests each principal may make per hour, per resource
// (core REST and graphql are separate budgets, as on GitHub); n < 0 counts
// as 0, a budget every request exceeds. Requests without a token keep
// AnonymousBudget unless n is lower.
func WithBudget(n int) Option {
	return func(s *Sim) { s.defaultLimit = max(n, 0) }
}

// WithTokenTTL sets how long minted installation tokens live; d <= 0 keeps
// DefaultTokenTTL. A token is refused from its expires_at on, on the
// simulator's clock (Advance moves it); the TTL is not scaled by
// WithMinute, as expires_at announces it, so a harness compressing the
// hour sets it too. A TTL under a minute makes ghinstallation refresh
// before every request.
func WithTokenTTL(d time.Duration) Option {
	return func(s *Sim) {
		if d > 0 {
			s.tokenTTL = d
		}
	}
}

// Sim is a simulated GitHub. It is an http.Handler, and safe for concurrent
// use; its in-process methods and its HTTP endpoints change the same state.
type Sim struct {
	mux      *http.ServeMux
	now      func() time.Time
	tokenTTL time.Duration
	jwtTimes bool // WithJWTTimes

	minute         time.Duration      // WithMinute
	limitsOn       SecondaryLimits    // WithSecondaryLimits
	latency        *latencyModel      // WithLatency; nil: answers are instant
	gqlLimitAnswer GraphQLLimitAnswer // WithGraphQLLimitAnswer
	installSize    *InstallationSize  // WithInstallationSize
	faults         faultModel         // WithGraphQLFaults, SetGraphQLFaults; s.mu guards it

	mu            sync.Mutex
	offset        time.Duration // Advance's total
	defaultLimit  int
	limits        map[string]int // per-principal budgets set by SetBudget
	windows       map[bucket]*window
	secondary     map[string]*secondaryRule // by token; "" matches any
	secWindows    map[secKey]*secWindow
	inFlight      map[string]int         // by principal
	installations map[string]mintedToken // by token (apps.go)
	users         map[string]string      // token → user, set by MapToken
	repos         map[string]*repo
	stats         map[statKey]int64
	points        map[statKey]int64           // budget units charged, beside stats
	took          map[statKey]time.Duration   // modelled response time, beside stats
	installSizes  map[string]InstallationSize // by principal, set by SetInstallationSize
	refusals      map[refusalKey]int64        // refused requests by kind (clock_stats.go)
	cpuMinutes    map[cpuMinuteKey]time.Duration
	pullReads     map[readKey][]time.Time
	nextID        int64
	minted        int

	apps        map[int64]*simInstallation // the App's installations (apps.go)
	removedApps map[int64]bool             // removed and not added again
	repoInstall map[string]int64           // lower-case "owner/name" → installation covering it
	hook        Webhook                    // where installation webhooks go (SetWebhook)
	hookClient  *http.Client
	hookSeq     int64
	hooksSent   int64
	hooksFailed int64

	reqLog requestLog // requestlog.go
}

// New returns a Sim with no repositories and fresh budgets.
func New(opts ...Option) *Sim {
	s := &Sim{
		mux:           http.NewServeMux(),
		now:           time.Now,
		tokenTTL:      DefaultTokenTTL,
		minute:        time.Minute,
		limitsOn:      GitHubSecondaryLimits,
		defaultLimit:  DefaultBudget,
		limits:        make(map[string]int),
		windows:       make(map[bucket]*window),
		secondary:     make(map[string]*secondaryRule),
		secWindows:    make(map[secKey]*secWindow),
		inFlight:      make(map[string]int),
		installations: make(map[string]mintedToken),
		users:         make(map[string]string),
		repos:         make(map[string]*repo),
		stats:         make(map[statKey]int64),
		points:        make(map[statKey]int64),
		took:          make(map[statKey]time.Duration),
		installSizes:  make(map[string]InstallationSize),
		refusals:      make(map[refusalKey]int64),
		cpuMinutes:    make(map[cpuMinuteKey]time.Duration),
		pullReads:     make(map[readKey][]time.Time),
		apps:          make(map[int64]*simInstallation),
		removedApps:   make(map[int64]bool),
		repoInstall:   make(map[string]int64),
		hookClient:    &http.Client{},
	}
	for _, o := range opts {
		o(s)
	}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Now is the simulator's current time: its clock plus every Advance.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock()
}

// clock is Now with s.mu held.
func (s *Sim) clock() time.Time {
	return s.now().Add(s.offset).UTC()
}

// APIRoutes are the patterns of the GitHub endpoints the simulator serves
// ("GET /repos/{owner}/{repo}/pulls/{number}", "POST /graphql"), sorted:
// what its answers' contract tests must cover.
func APIRoutes() []string {
	return slices.Sorted(maps.Keys(new(Sim).endpoints()))
}

// endpoints are the GitHub endpoints, by pattern.
func (s *Sim) endpoints() map[string]func(*http.Request, string) reply {
	return map[string]func(*http.Request, string) reply{
		"GET /repos/{owner}/{repo}/pulls/{number}":       s.getPull,
		"GET /repos/{owner}/{repo}/commits/{ref}/status": s.getCombinedStatus,
		"POST /repos/{owner}/{repo}/statuses/{sha}":      s.createStatus,
		"GET /repos/{owner}/{repo}/issues":               s.listIssues,
		"GET /repos/{owner}/{repo}/issues/{number}":      s.getIssue,
		"POST /app/installations/{id}/access_tokens":     s.createInstallationToken,
		"GET /app/installations":                         s.listInstallations,
		"GET /app/installations/{id}":                    s.getInstallation,
		"GET /repos/{owner}/{repo}/installation":         s.getRepoInstallation,
		"GET /installation/repositories":                 s.listInstallationRepos,
		"POST /graphql":                                  s.graphql,
	}
}

func (s *Sim) routes() {
	api := s.endpoints()
	api["/"] = func(*http.Request, string) reply {
		return errorReply(http.StatusNotFound, "Not Found")
	}
	for pattern, h := range api {
		s.mux.Handle(pattern, s.api(h))
	}
	control := map[string]func(*http.Request) reply{
		"POST /_sim/repos/{owner}/{repo}/pulls":               s.ctlSeedPull,
		"POST /_sim/repos/{owner}/{repo}/pulls/{number}/head": s.ctlPushHead,
		"POST /_sim/repos/{owner}/{repo}/pulls/{number}/close": func(r *http.Request) reply {
			return s.ctlPull(r, s.Close)
		},
		"POST /_sim/repos/{owner}/{repo}/pulls/{number}/merge": func(r *http.Request) reply {
			return s.ctlPull(r, s.Merge)
		},
		"POST /_sim/repos/{owner}/{repo}/statuses/{sha}": s.ctlSetStatus,
		"POST /_sim/repos/{owner}/{repo}/issues":         s.ctlSeedIssue,
		"DELETE /_sim/repos/{owner}/{repo}/issues/{number}": func(r *http.Request) reply {
			return s.ctlPull(r, s.DeleteIssue)
		},
		"POST /_sim/repos/{owner}/{repo}/issues/{number}/transfer": s.ctlTransferIssue,
		"POST /_sim/budget":                    s.ctlBudget,
		"POST /_sim/tokens":                    s.ctlMapToken,
		"POST /_sim/repos/{owner}/{repo}/refs": s.ctlSetRef,
		"POST /_sim/clock/advance":             s.ctlAdvance,
		"POST /_sim/hour/reset":                s.ctlResetHour,
		"POST /_sim/secondary":                 s.ctlSecondary,
		"POST /_sim/installations":             s.ctlAddInstallation,
		"DELETE /_sim/installations/{id}": func(r *http.Request) reply {
			return s.ctlInstallation(r, s.RemoveInstallation)
		},
		"POST /_sim/installations/{id}/repos": s.ctlInstallationRepos,
		"POST /_sim/installations/{id}/suspend": func(r *http.Request) reply {
			return s.ctlInstallation(r, s.SuspendInstallation)
		},
		"POST /_sim/installations/{id}/unsuspend": func(r *http.Request) reply {
			return s.ctlInstallation(r, s.UnsuspendInstallation)
		},
		"POST /_sim/installations/{id}/refuse-mints": s.ctlRefuseMints,
		"GET /_sim/installations":                    func(*http.Request) reply { return jsonReply(http.StatusOK, s.Installations()) },
		"GET /_sim/installations/requests":           s.ctlRequestLog,
		"POST /_sim/webhook":                         s.ctlWebhook,
		"GET /_sim/stats":                            func(*http.Request) reply { return jsonReply(http.StatusOK, s.Stats()) },
		"POST /_sim/stats/reset":                     s.ctlResetStats,
		"GET /_sim/reads":                            s.ctlReads,
		"POST /_sim/faults":                          s.ctlFaults,
		"/_sim/redirect/{hops}/{path...}":            s.ctlRedirect,
		"/_sim/": func(*http.Request) reply {
			return jsonReply(http.StatusNotFound, githubError{Message: "forgesim: no such control endpoint"})
		},
	}
	for pattern, h := range control {
		s.mux.Handle(pattern, s.control(h))
	}
}
