package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/go-github/v88/github"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrNotInstalled is wrapped when no installation of the App covers a
// repository, or an installation ID is not one of the App's.
var ErrNotInstalled = errors.New("forge: the App is not installed")

// ErrSuspended wraps ErrNotInstalled when the installation covering a
// repository is suspended: GitHub lists it but serves it no token until it
// is unsuspended. A request an installation's Client made with a token
// minted before the suspension, which GitHub refuses for it, fails with
// it too (not with ErrForbidden, and never as a rate limit); the token is
// dropped.
var ErrSuspended = fmt.Errorf("%w: its installation is suspended", ErrNotInstalled)

// DefaultRelistEvery is how often AppClient.Run lists the App's
// installations again when AppConfig.RelistEvery is 0. Webhooks keep the
// set current; the re-list is the safety net for a webhook lost or never
// configured, so it can be slow: a 1,000-installation App spends 10
// requests on it, an hour.
const DefaultRelistEvery = time.Hour

// DefaultLowestBudgets is how many installations get a series of their own
// in forge_installation_rate_limit_remaining when AppConfig.LowestBudgets is
// 0.
const DefaultLowestBudgets = 10

// AppConfig configures an AppClient: a GitHub App serving each of its
// installations.
type AppConfig struct {
	// BaseURL, Next, Logger, Now, Reserves, Timeout and UserAgent are as
	// in Config, and apply to every installation's client.
	BaseURL string
	Next    http.RoundTripper
	Logger  *slog.Logger
	Now     func() time.Time
	// Reserves apply to each installation's budget on its own.
	Reserves map[string]int
	Timeout  time.Duration
	// UserAgent is as Config.UserAgent: the App's own requests and every
	// installation's carry it, with their lane.
	UserAgent string
	// AppID and PrivateKey (PEM-encoded RSA) are the App's.
	AppID      int64
	PrivateKey []byte
	// Registerer gets the Config metrics (counted over every installation
	// and the App's own requests) and forge_installations and
	// forge_installation_rate_limit_remaining; nil: no Prometheus.
	Registerer prometheus.Registerer
	// ETagCacheBytes bounds the one ETag cache every installation shares,
	// as Config.ETagCacheBytes bounds a Client's.
	ETagCacheBytes int
	// RelistEvery is Run's period; 0: DefaultRelistEvery.
	RelistEvery time.Duration
	// LowestBudgets is how many installations, those with the least core
	// budget remaining, forge_installation_rate_limit_remaining has a
	// series for; 0: DefaultLowestBudgets.
	LowestBudgets int
	// Tokens keeps the installation tokens; AppClients sharing one (the
	// replicas of a deployment, through one database) mint one token per
	// installation between them and serve it until TokenMargin before its
	// expiry. nil: a MemoryTokenStore of this AppClient's own.
	Tokens TokenStore
	// Owner names this replica as the minter of the tokens it stores
	// (InstallationToken.MintedBy).
	Owner string
}

// Installation is one installation of the App, as the AppClient knows it.
type Installation struct {
	ID      int64
	Account string // the login of the user or organization it is on
}

// SuspendedInstallation is an installation of the App that GitHub has
// suspended, as the AppClient last heard: it serves it nothing until it is
// unsuspended (Suspended).
type SuspendedInstallation struct {
	ID      int64
	Account string // "" when unsaid
	// At is GitHub's suspended_at, zero when the answer that said so
	// did not carry it.
	At time.Time
}

// AppClient is a GitHub App's client: it knows the App's installations,
// and holds one Client per installation, each with its own installation
// token (from AppConfig.Tokens, minted with the App's JWT when none there
// is servable), its own rate gate and budget figures, so
// one installation's spent budget never holds another back. Every
// installation's requests, and the App's own, are counted by one counting
// transport: one hourly line, broken down by installation, and one ETag
// cache, whose entries are per token.
//
// The App's own requests (listing installations, finding a repository's)
// are made with its JWT and charged to LaneApp; token mints, also made
// with its JWT, are charged to LaneAuth and to the installation. Both
// pass one rate gate, the App's: a mint GitHub refuses with a rate limit
// holds back the App's next JWT requests, mints included, until the
// limit's reset or retry-after. Safe for concurrent use.
type AppClient struct {
	cfg    AppConfig
	base   string
	now    func() time.Time
	parts  countedParts
	minter *github.Client // mints installation tokens with the App's JWT
	tokens TokenStore
	app    *Client // the App's own, with its JWT
	lowest int

	mu    sync.Mutex
	known map[int64]*appInstallation
	// suspended is the installations GitHub said are suspended
	// (Suspended leaves out those in known since).
	suspended map[int64]SuspendedInstallation
	repos     map[string]int64 // RepoKey → installation covering it
	listed    time.Time        // last complete list
	// changed is when a list, a webhook or an Apply last changed what
	// the set says (Changed).
	changed time.Time
	// found is the installations, by id with their account, known since
	// the last TakeFound by a repository's look-up or a list after the
	// first, and not dropped since.
	found map[int64]string
}

type appInstallation struct {
	account string
	client  *Client           // made on first use
	tokens  *installationAuth // the client's token source
}

// LaneApp is the App's own requests, made with its JWT: listing its
// installations and finding a repository's.
const LaneApp = "app"

// NewApp validates cfg and returns an AppClient that knows no installation
// yet: call Relist (or Run) to list them. Errors wrap ErrInvalidConfig and
// name the field.
func NewApp(cfg AppConfig) (*AppClient, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("%w: AppID %d: must be positive", ErrInvalidConfig, cfg.AppID)
	}
	if cfg.RelistEvery < 0 {
		return nil, fmt.Errorf("%w: RelistEvery %v: must be >= 0", ErrInvalidConfig, cfg.RelistEvery)
	}
	if cfg.LowestBudgets < 0 {
		return nil, fmt.Errorf("%w: LowestBudgets %d: must be >= 0", ErrInvalidConfig, cfg.LowestBudgets)
	}
	base, now, parts, err := prepare(Config{
		BaseURL: cfg.BaseURL, Next: cfg.Next, Logger: cfg.Logger, Registerer: cfg.Registerer, Now: cfg.Now,
		Reserves: cfg.Reserves, ETagCacheBytes: cfg.ETagCacheBytes, Timeout: cfg.Timeout, UserAgent: cfg.UserAgent,
	})
	if err != nil {
		return nil, err
	}
	// The App's own requests go through appLane, mints of every
	// installation's token through authLane; both, made with the App's
	// JWT, one at a time (jwtGate), and under the App's rate gate: GitHub
	// limits the JWT's requests as one principal, so a mint refused by a
	// limit holds the next mint and the App's other requests back too.
	jwt := newJWTGate()
	jwtAuth, err := appsTransport(&appLane{next: parts.counted, jwt: jwt}, cfg.AppID, cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("%w: PrivateKey: %w", ErrInvalidConfig, err)
	}
	// The rate-limit gauges by host would mix the App's budget with its
	// installations'; they are registered (with the reserves) but left
	// unset, and appCollector exports the installations' budgets instead.
	if _, err := newRateMetrics(cfg.Registerer, cfg.Reserves); err != nil {
		return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
	}
	app, err := assemble(jwtAuth, parts.counting, base, now, nil, nil, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	atr, err := appsTransport(&authLane{next: parts.counted, jwt: jwt}, cfg.AppID, cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("%w: PrivateKey: %w", ErrInvalidConfig, err)
	}
	minter, err := github.NewClient(github.WithHTTPClient(&http.Client{Transport: gateOver{gate: app.gate, next: atr}}), github.WithURLs(&base, nil), github.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("%w: BaseURL %q: %w", ErrInvalidConfig, base, err)
	}
	tokens := cfg.Tokens
	if tokens == nil {
		tokens = new(MemoryTokenStore)
	}
	a := &AppClient{
		cfg: cfg, base: base, now: now, parts: parts, minter: minter, tokens: tokens, app: app,
		lowest: cmp.Or(cfg.LowestBudgets, DefaultLowestBudgets),
		known:  make(map[int64]*appInstallation), repos: make(map[string]int64),
		suspended: make(map[int64]SuspendedInstallation), found: make(map[int64]string),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(appCollector{a}); err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
	}
	return a, nil
}

// appLane charges every request it passes to LaneApp. Safe for concurrent
// use.
type appLane struct {
	next http.RoundTripper
	jwt  jwtGate
}

// RoundTrip implements http.RoundTripper.
func (t *appLane) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.jwt.roundTrip(t.next, req.WithContext(WithLane(req.Context(), LaneApp)))
}

// installationTag counts every request it passes as installation id's.
type installationTag struct {
	next http.RoundTripper
	id   int64
}

// RoundTrip implements http.RoundTripper.
func (t *installationTag) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.next.RoundTrip(req.WithContext(withInstallation(req.Context(), t.id)))
}

// App is the Client of the App's own requests, made with its JWT and
// charged to LaneApp.
func (a *AppClient) App() *Client { return a.app }

// Relist lists the App's installations (GET /app/installations, every
// page, LaneApp) and makes the known set exactly that list less the
// suspended installations: installations new to it are added, those
// missing or suspended are dropped with their clients and the
// repositories resolved to them. GitHub lists a suspended installation,
// with its suspended_at set, but refuses to mint its tokens (see
// suspended); knowing it would have its sweeper ask for a refused token
// every pass until it is unsuspended. The list's suspended installations
// are what Suspended says from then on. On an error the set is unchanged; an
// installation in the answer without a positive id (GitHub's schema
// requires one) fails the whole list with ErrMalformedAnswer, since
// reading the rest as the whole set would drop the installation it hides.
func (a *AppClient) Relist(ctx context.Context) error {
	ctx = WithLane(ctx, LaneApp)
	opts := &github.ListOptions{PerPage: 100}
	var all []*github.Installation
	for {
		page, resp, err := a.app.gh.Apps.ListInstallations(ctx, opts)
		if err != nil {
			return a.app.wrap(ctx, "list installations", err)
		}
		for _, in := range page {
			if in.GetID() <= 0 {
				return fmt.Errorf("%w: GET /app/installations: an installation's id is %d (on account %q), want a positive id", ErrMalformedAnswer, in.GetID(), in.GetAccount().GetLogin())
			}
		}
		all = append(all, page...)
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	seen := make(map[int64]bool, len(all))
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.suspended)
	first := a.listed.IsZero()
	for _, in := range all {
		if suspended(in) {
			a.suspendLocked(in)
			continue
		}
		id := in.GetID()
		seen[id] = true
		if first {
			a.addLocked(id, in.GetAccount().GetLogin())
		} else {
			a.findLocked(id, in.GetAccount().GetLogin())
		}
	}
	for id := range a.known {
		if !seen[id] {
			a.dropLocked(id)
		}
	}
	a.listed = a.now()
	a.changed = a.listed
	return nil
}

// relistRetry is the first wait before Run lists again after a failed
// list that no rate limit timed; each failure in a row doubles it, up to
// the period.
const relistRetry = 30 * time.Second

// Run lists the installations every RelistEvery (the first time at once)
// until ctx is done, and returns ctx's error. A failed list is logged and
// tried again sooner than the period, so that a replica whose start-up
// list failed does not serve no installation for a period: at the
// limit's reset when a rate limit refused it (RateLimitError.Reset), else
// after relistRetry, doubling with each failure in a row up to the
// period; and up to a quarter of that wait later still (at most a minute),
// at random, so that replicas refused together do not all ask again at
// the same instant.
func (a *AppClient) Run(ctx context.Context) error {
	return a.RunInTurn(ctx, nil)
}

// RunInTurn is Run, each list made in turn: turn (nil: none) is called
// before each list, returns once this AppClient may list, and gives what
// to call when the list is done. Replicas sharing one App pass a turn that
// lets one of them list at a time (the server's lease): their lists, sent
// together, would spend the App's CPU-time limit together. A list whose
// ctx ended while it waited for its turn is not made.
func (a *AppClient) RunInTurn(ctx context.Context, turn func(context.Context) (done func())) error {
	every := a.RelistEvery()
	logger := cmp.Or(a.cfg.Logger, slog.New(slog.DiscardHandler))
	t := time.NewTimer(0)
	defer t.Stop()
	backoff := relistRetry
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		err := a.RelistInTurn(ctx, turn)
		if err == nil || ctx.Err() != nil {
			backoff = relistRetry
			t.Reset(every)
			continue
		}
		wait := min(backoff, every)
		backoff *= 2
		if rl, ok := errors.AsType[*RateLimitError](err); ok {
			wait = min(max(time.Until(rl.Reset), 0), every)
		}
		wait += rand.N(min(wait/4, time.Minute) + 1)
		logger.Warn("forge: listing the App's installations failed; the known set is kept, and listed again", "in", wait.Round(time.Second).String(), "err", err)
		t.Reset(wait)
	}
}

// RelistEvery is Run's period: AppConfig.RelistEvery, or
// DefaultRelistEvery when that is 0. What a webhook did not say, the App
// client learns within it.
func (a *AppClient) RelistEvery() time.Duration {
	return cmp.Or(a.cfg.RelistEvery, DefaultRelistEvery)
}

// RelistInTurn is Relist made in turn (RunInTurn); turn nil: at once.
func (a *AppClient) RelistInTurn(ctx context.Context, turn func(context.Context) (done func())) error {
	if turn != nil {
		done := turn(ctx)
		defer done()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return a.Relist(ctx)
}

// suspended tells whether GitHub's answer says installation in is
// suspended: its suspended_at is set. GitHub still lists it and answers
// it, but "When a GitHub App is suspended, the app's access to the GitHub
// API or webhook events is blocked for that account" ("Suspend an app
// installation":
// https://docs.github.com/rest/apps/apps#suspend-an-app-installation),
// and a mint of its token is refused 403 ("Create an installation access
// token for an app":
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app).
// The App serves it again once an unsuspend webhook or a list says so.
func suspended(in *github.Installation) bool { return in.SuspendedAt != nil }

// InstallationChange is what one installation webhook changed in the
// known set: the replica it reached tells the others, which Apply it
// instead of listing the App's installations again. The zero value (ID
// 0) changed nothing.
type InstallationChange struct {
	ID int64
	// Gone is true when the installation was dropped (deleted,
	// suspended); else it is known from then on.
	Gone bool
	// Suspended is true, with Gone, when it was dropped because GitHub
	// suspended it: Suspended lists it from then on.
	Suspended bool
	// SuspendedAt is GitHub's suspended_at of a Suspended change, as the
	// AppClient that made it heard it; zero when unsaid.
	SuspendedAt time.Time
	// Account is the installation's account login, "" when unsaid.
	Account string
	// Repositories is true when the event changed which repositories
	// the installation covers.
	Repositories bool
}

// Apply makes the known set say what ch says, as another replica's
// HandleInstallationEvent or HandleInstallationRepositoriesEvent changed
// its own: a Gone installation is dropped with its client and the
// repositories resolved to it, and a Suspended one is listed by
// Suspended, with the change's SuspendedAt (when it is zero, the
// suspended_at this AppClient heard, if any), while one Gone and not Suspended (deleted) is no longer listed there,
// as HandleInstallationEvent's deleted does; another is known (its account, when
// said, updated), and when its Repositories changed, the repositories
// resolved to it are forgotten, so the next ForRepo of each asks GitHub
// again. Applying a change twice is applying it once. It sends no request.
func (a *AppClient) Apply(ch InstallationChange) {
	if ch.ID <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changed = a.now()
	if ch.Gone {
		if ch.Suspended {
			in := &github.Installation{ID: github.Ptr(ch.ID), Account: &github.User{Login: github.Ptr(ch.Account)}}
			if !ch.SuspendedAt.IsZero() {
				in.SuspendedAt = &github.Timestamp{Time: ch.SuspendedAt}
			}
			a.suspendLocked(in)
		} else {
			delete(a.suspended, ch.ID)
		}
		a.dropLocked(ch.ID)
		return
	}
	a.addLocked(ch.ID, ch.Account)
	if ch.Repositories {
		a.forgetReposLocked(ch.ID)
	}
}

// DropChecked drops installation id, which InstallationGone has just said
// is suspended or gone, and returns the change for the other replicas to
// Apply: Suspended, with its account and suspended_at, when GitHub's
// answer was that it is suspended, which Suspended then lists; else Gone
// alone (deleted). It sends no request.
func (a *AppClient) DropChecked(id int64) InstallationChange {
	if id <= 0 {
		return InstallationChange{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := InstallationChange{ID: id, Gone: true}
	if s, ok := a.suspended[id]; ok {
		ch.Suspended, ch.Account, ch.SuspendedAt = true, s.Account, s.At
		if k := a.known[id]; k != nil && ch.Account == "" {
			ch.Account = k.account
		}
	}
	a.changed = a.now()
	a.dropLocked(id)
	return ch
}

// addLocked knows installation id on account, which is then not
// suspended; a.mu is held.
func (a *AppClient) addLocked(id int64, account string) {
	delete(a.suspended, id)
	if in := a.known[id]; in != nil {
		if account != "" {
			in.account = account
		}
		return
	}
	a.known[id] = &appInstallation{account: account}
}

// findLocked is addLocked for an installation GitHub named in a list or
// a repository's look-up: one not known yet is found, for TakeFound; a.mu
// is held.
func (a *AppClient) findLocked(id int64, account string) {
	if a.known[id] == nil {
		a.found[id] = account
	}
	a.addLocked(id, account)
}

// TakeFound returns, and forgets, the installations this AppClient came
// to know since the last call otherwise than by a webhook or another
// replica's news: by a repository's look-up (ForRepo, Recheck) or by a
// list after its first (Relist; an installation whose created webhook was
// lost), less those dropped since, in order of id, each as the change for
// the other replicas to Apply. A replica not told of them would know them
// only at its own next list. It sends no request.
func (a *AppClient) TakeFound() []InstallationChange {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]InstallationChange, 0, len(a.found))
	for id, account := range a.found {
		out = append(out, InstallationChange{ID: id, Account: account})
	}
	clear(a.found)
	slices.SortFunc(out, func(x, y InstallationChange) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// dropLocked forgets installation id and the repositories resolved to it;
// a.mu is held.
func (a *AppClient) dropLocked(id int64) {
	delete(a.known, id)
	delete(a.found, id)
	a.forgetReposLocked(id)
}

// suspendLocked notes GitHub's answer in, a suspended installation, for
// Suspended; a.mu is held.
func (a *AppClient) suspendLocked(in *github.Installation) {
	id := in.GetID()
	if id <= 0 {
		return
	}
	s := SuspendedInstallation{ID: id, Account: in.GetAccount().GetLogin(), At: in.GetSuspendedAt().Time}
	if k := a.known[id]; k != nil && s.Account == "" {
		s.Account = k.account
	}
	if old, ok := a.suspended[id]; ok {
		s.Account = cmp.Or(s.Account, old.Account)
		if s.At.IsZero() {
			s.At = old.At
		}
	}
	a.suspended[id] = s
}

// Suspended is the App's installations GitHub last said are suspended,
// by ID, less those in Installations. It is what this AppClient heard
// and asks GitHub nothing: the suspended installations of its last list
// (Relist), then those a suspend webhook (HandleInstallationEvent), a
// repository's look-up (ForRepo) or a check (InstallationGone) said are
// suspended, and those another replica's news said are suspended
// (Apply), less those known, deleted or found not suspended since.
func (a *AppClient) Suspended() []SuspendedInstallation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]SuspendedInstallation, 0, len(a.suspended))
	for _, s := range a.suspended {
		if a.known[s.ID] == nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y SuspendedInstallation) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// forgetReposLocked forgets the repositories resolved to installation id;
// a.mu is held.
func (a *AppClient) forgetReposLocked(id int64) {
	for k, v := range a.repos {
		if v == id {
			delete(a.repos, k)
		}
	}
}

// HandleInstallationEvent keeps the set current from an installation
// webhook ("Webhook events and payloads", installation:
// https://docs.github.com/webhooks/webhook-events-and-payloads#installation):
// created, unsuspend and new_permissions_accepted add the
// installation (and the repositories the payload lists resolve to it);
// deleted and suspend drop it, and suspend has Suspended list it, with
// the payload's suspended_at (when the payload has none, the one this
// AppClient heard before, if any), which the change returned carries.
// Other actions and an event without an installation ID change nothing.
// It sends no request, and returns the change, for the other replicas to
// Apply (the zero value: none).
func (a *AppClient) HandleInstallationEvent(ev *github.InstallationEvent) InstallationChange {
	id := ev.GetInstallation().GetID()
	if id <= 0 {
		return InstallationChange{}
	}
	account := ev.GetInstallation().GetAccount().GetLogin()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.GetAction() {
	case "created", "unsuspend", "new_permissions_accepted":
		a.changed = a.now()
		a.addLocked(id, account)
		for _, r := range ev.Repositories {
			a.repos[RepoKey(r.GetFullName())] = id
		}
		return InstallationChange{ID: id, Account: account, Repositories: len(ev.Repositories) > 0}
	case "deleted", "suspend":
		a.changed = a.now()
		ch := InstallationChange{ID: id, Gone: true, Account: account}
		if ev.GetAction() == "suspend" {
			a.suspendLocked(ev.GetInstallation())
			ch.Suspended, ch.SuspendedAt = true, a.suspended[id].At
		} else {
			delete(a.suspended, id)
		}
		a.dropLocked(id)
		return ch
	}
	return InstallationChange{}
}

// HandleInstallationRepositoriesEvent keeps the repositories current from
// an installation_repositories webhook
// (https://docs.github.com/webhooks/webhook-events-and-payloads#installation_repositories):
// those added resolve to its
// installation (known from then on), those removed are forgotten, and the
// next ForRepo for one asks GitHub again. It sends no request, and
// returns the change, for the other replicas to Apply (the zero value:
// none).
func (a *AppClient) HandleInstallationRepositoriesEvent(ev *github.InstallationRepositoriesEvent) InstallationChange {
	id := ev.GetInstallation().GetID()
	if id <= 0 {
		return InstallationChange{}
	}
	account := ev.GetInstallation().GetAccount().GetLogin()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changed = a.now()
	a.addLocked(id, account)
	for _, r := range ev.RepositoriesAdded {
		a.repos[RepoKey(r.GetFullName())] = id
	}
	for _, r := range ev.RepositoriesRemoved {
		if k := RepoKey(r.GetFullName()); a.repos[k] == id {
			delete(a.repos, k)
		}
	}
	return InstallationChange{ID: id, Account: account, Repositories: true}
}

// Installations is the known set, by ID.
func (a *AppClient) Installations() []Installation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Installation, 0, len(a.known))
	for id, in := range a.known {
		out = append(out, Installation{ID: id, Account: in.account})
	}
	slices.SortFunc(out, func(x, y Installation) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// LastListed is when Relist last completed; zero before.
func (a *AppClient) LastListed() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.listed
}

// Changed is when the installations or the repositories resolved to them
// last changed by a list (Relist), a webhook (HandleInstallationEvent,
// HandleInstallationRepositoriesEvent), another replica's news (Apply) or
// a check that dropped an installation (DropChecked); zero before any. A repository no installation covered may be covered
// since.
func (a *AppClient) Changed() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// Timeout is the deadline each request of every installation's Client
// gets (AppConfig.Timeout), or 0 when it has none beyond its context.
func (a *AppClient) Timeout() time.Duration {
	return a.cfg.Timeout
}

// Installation is the Client of installation id, made on first use and
// the same one after: its token is installation id's, and so are its rate
// gate and budget figures and its counts. An id not in the known set wraps
// ErrNotInstalled and names it.
func (a *AppClient) Installation(id int64) (*Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	in := a.known[id]
	if in == nil {
		return nil, fmt.Errorf("%w: installation %d is not one of App %d's known installations", ErrNotInstalled, id, a.cfg.AppID)
	}
	if in.client == nil {
		c, auth, err := a.newInstallationClient(id)
		if err != nil {
			return nil, err
		}
		in.client, in.tokens = c, auth
	}
	return in.client, nil
}

// newInstallationClient makes a Client of installation id, and its token
// source, whether or not the known set has id: its token comes from the
// TokenStore or is minted and stored, its requests are counted as id's.
func (a *AppClient) newInstallationClient(id int64) (*Client, *installationAuth, error) {
	auth := &installationAuth{id: id, store: a.tokens, mint: a.mint, next: a.parts.counted, turn: make(chan struct{}, 1),
		logger: cmp.Or(a.cfg.Logger, slog.New(slog.DiscardHandler))}
	tagged := &installationTag{next: auth, id: id}
	c, err := assemble(tagged, a.parts.counting, a.base, a.now, a.cfg.Reserves, nil, a.cfg.Timeout)
	if err != nil {
		return nil, nil, err
	}
	c.installation = id
	return c, auth, nil
}

// ForRepo resolves owner/repo to the installation covering it and returns
// that installation's Client and ID. A repository is resolved once (GET
// /repos/{owner}/{repo}/installation with the App's JWT, LaneApp) and
// cached under RepoKey, so names compare without regard to case; the
// installation webhooks keep the cache current. A repository no
// installation covers wraps ErrNotInstalled and names it, one whose
// installation is suspended ErrSuspended; it is not cached, and a suspended
// installation is not added to the known set.
func (a *AppClient) ForRepo(ctx context.Context, owner, repo string) (*Client, int64, error) {
	full := owner + "/" + repo
	key := RepoKey(full)
	a.mu.Lock()
	id, ok := a.repos[key]
	a.mu.Unlock()
	if !ok {
		ctx = WithLane(ctx, LaneApp)
		in, _, err := a.app.gh.Apps.GetRepositoryInstallation(ctx, owner, repo)
		if err != nil {
			err = a.app.wrap(ctx, "find installation of "+full, err)
			if errors.Is(err, ErrNotFound) {
				return nil, 0, fmt.Errorf("%w: no installation of App %d covers repository %s: %w", ErrNotInstalled, a.cfg.AppID, full, err)
			}
			return nil, 0, err
		}
		id = in.GetID()
		if suspended(in) {
			a.mu.Lock()
			a.suspendLocked(in)
			a.mu.Unlock()
			return nil, 0, fmt.Errorf("%w: installation %d of App %d, which covers repository %s", ErrSuspended, id, a.cfg.AppID, full)
		}
		a.mu.Lock()
		a.findLocked(id, in.GetAccount().GetLogin())
		a.repos[key] = id
		a.mu.Unlock()
	}
	c, err := a.Installation(id)
	if err != nil {
		return nil, 0, fmt.Errorf("repository %s: %w", full, err)
	}
	return c, id, nil
}

// Recheck is ForRepo for a repository that installation stale's token
// could not read: when the cache resolves owner/repo to stale, it forgets
// that and asks GitHub again (one request with the App's JWT, LaneApp), so
// a repository that moved to another installation without the webhook
// that says so reaching this replica (GitHub does not redeliver a failed
// delivery on its own: "Handling failed webhook deliveries",
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries)
// resolves to the installation covering it now. When the cache resolves it
// to another installation, that one is returned without a request.
func (a *AppClient) Recheck(ctx context.Context, owner, repo string, stale int64) (*Client, int64, error) {
	key := RepoKey(owner + "/" + repo)
	a.mu.Lock()
	if id, ok := a.repos[key]; ok && id == stale {
		delete(a.repos, key)
	}
	a.mu.Unlock()
	return a.ForRepo(ctx, owner, repo)
}

// Counts is a snapshot of every request the App and its installations
// sent, one entry per host, API, lane, status code and installation (0:
// the App's own), sorted by those fields.
func (a *AppClient) Counts() []Count {
	return a.parts.counting.counts()
}

// Close writes the hourly line for the hour being counted, as a partial
// hour ending now (nothing when no request was counted since the last
// line). The AppClient stays usable.
func (a *AppClient) Close() {
	a.parts.counting.flush()
}
