package board

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// DefaultInterval is the time between two passes of the board sync.
const DefaultInterval = 5 * time.Minute

// DefaultFullEvery is how long a repository goes between two full syncs
// unless Config.FullEvery says otherwise.
const DefaultFullEvery = 24 * time.Hour

// IssueReader is what the board sync needs from the forge; *forge.Client
// is one.
type IssueReader interface {
	// ListIssues lists a repository's issues and pull requests updated at
	// or after since (zero: all), every page, most recently updated
	// first. The order keeps the watermark honest: listed by creation
	// (GitHub's default), an issue edited on a page already read would be
	// passed over by the watermark of a later edit on a later page.
	ListIssues(ctx context.Context, owner, repo string, since time.Time) ([]forge.Issue, error)
	// GetIssue reads one issue, following a transferred issue to its new
	// repository; a deleted one is forge.ErrGone or forge.ErrNotFound.
	GetIssue(ctx context.Context, owner, repo string, number int) (forge.Issue, error)
}

var _ IssueReader = (*forge.Client)(nil)

// RepoPass is what one pass of the board sync did for one repository.
type RepoPass struct {
	// Repo is "owner/name".
	Repo string
	// Since is the watermark the pass listed from; zero for a full sync.
	Since time.Time
	// Removed is how many cards a full sync removed, of issues the forge
	// no longer lists there: deleted, or transferred to another
	// repository.
	Removed int
	// Listed is how many issues the forge returned; Changed how many of
	// them changed the stored card; LeftOut how many no card could hold
	// (a field GitHub's schema does not allow, such as an unknown state),
	// each logged and skipped rather than failing the repository.
	Listed, Changed, LeftOut int
	// Watermark is the repository's watermark after the pass: the latest
	// updated time seen, unmoved when the pass failed for the repository.
	Watermark time.Time
	// Err is why the repository was not synced (nil: it was).
	Err error
}

// Pass reports one pass of the board sync to Config.OnPass.
type Pass struct {
	// Owner is the replica that synced.
	Owner string
	// Term counts the terms this sync served, from 1; Pass counts the
	// passes of the term, from 1.
	Term, Pass int
	// At is when the pass began.
	At time.Time
	// Repos has one entry per repository the pass reached, in the
	// configured order; a pass stopped early has fewer.
	Repos []RepoPass
	// Pruned is how many cards the pass removed of repositories no longer
	// on the board (Config.BoardRepos), at a term's first pass and every
	// FullEvery when the store granted the period's claim
	// (Store.ClaimPrune: once a period between the replicas of one list);
	// PruneErr is why it could not remove them or the tombstones, in
	// which case the next pass tries again what failed.
	Pruned   int
	PruneErr error
	// Expired is how many tombstones of removed cards, older than
	// TombstoneTTL, that prune dropped (Store.ExpireTombstones), of any
	// host; 0 when the pass did not prune.
	Expired int
	// Malformed is how many stored documents the pass met that the store
	// cannot read as cards (ErrMalformed, see WithMalformed): skipped by
	// its listings, or replaced by the card it put. Each is counted, and
	// logged, once a pass.
	Malformed int
	// Complete is false when the pass stopped early: a rate limit or the
	// end of the term.
	Complete bool
}

// Config assembles a Sync.
type Config struct {
	Store Store       // required: where the cards are kept
	Forge IssueReader // required: the forge client, in the server
	// Host is the forge host the cards are filed under, e.g. "github.com";
	// required.
	Host string
	// Repos are the repositories to sync, "owner/name"; at least one, and
	// each once, names compared without regard to case (CheckRepos).
	Repos []string
	// BoardRepos are every repository on the board, Repos among them;
	// nil means Repos, or with Pruner its board's. At each term's first
	// pass, and every FullEvery after, the sync removes the cards on Host
	// of every other repository (Store.Prune), and the expired tombstones
	// (Store.ExpireTombstones), once the store grants it the period
	// (Store.ClaimPrune): a repository dropped from the board takes its
	// cards with it, once a period for all the replicas of one list.
	BoardRepos []string
	// Pruner, when set, does that removal instead, for every sync sharing
	// it: for a board whose repositories several syncs share (App mode:
	// one sync per installation), at most once each Pruner's period
	// however many syncs there are, not once per sync and term. Its host
	// must be Host; BoardRepos must then be nil (the Pruner's are the
	// board's).
	Pruner *Pruner
	// Interval is the time between passes; 0 means DefaultInterval.
	Interval time.Duration
	// FullEvery is how long a repository goes between two full syncs,
	// which list every issue afresh and remove the cards of issues the
	// forge no longer has there; 0 means DefaultFullEvery. The first pass
	// of a term is always a full sync.
	FullEvery time.Duration
	// Owner names the replica in Pass, and in every log line: NewSync
	// adds it to Logger once.
	Owner string
	// Now is the clock of rate-limit pauses and Pass.At; nil means
	// time.Now.
	Now func() time.Time
	// Logger receives one line per pass, each repository that failed, and
	// each stored card document the pass met and could not read (once a
	// pass); nil discards.
	Logger *slog.Logger
	// OnPass is called synchronously after each pass, before the pass's
	// line is logged; nil means none. It must not block.
	OnPass func(Pass)
	// Watchdog bounds each pass and ends a term whose passes keep failing
	// (lease.Every); the zero Watchdog bounds nothing.
	Watchdog lease.Watchdog
}

// ErrConfig is wrapped by NewSync's errors about a bad field.
var ErrConfig = errors.New("board: invalid sync config")

// Sync is the forge board's issue sync: the net that keeps one card
// per issue and pull request of the configured repositories. Its Work
// serves one lease term; the server runs it only under the lease
// ForgeBoardSync() (or on every replica with --no-lease). Safe for
// concurrent use, though the lease runs one Work at a time.
type Sync struct {
	cfg   Config
	repos []boardRepo
	terms atomic.Int64
}

type boardRepo struct{ full, owner, name string }

// NewSync validates cfg and returns a Sync. Errors wrap
// ErrConfig and name the field and value.
func NewSync(cfg Config) (*Sync, error) {
	switch {
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: Store is nil", ErrConfig)
	case cfg.Forge == nil:
		return nil, fmt.Errorf("%w: Forge is nil", ErrConfig)
	case !validHost(cfg.Host):
		return nil, fmt.Errorf("%w: Host %q is not a host name", ErrConfig, cfg.Host)
	case cfg.Pruner != nil && cfg.Pruner.host != cfg.Host:
		return nil, fmt.Errorf("%w: Pruner's host %q is not Host %q", ErrConfig, cfg.Pruner.host, cfg.Host)
	case cfg.Pruner != nil && cfg.BoardRepos != nil:
		return nil, fmt.Errorf("%w: BoardRepos and Pruner are both set: the Pruner's repositories are the board's", ErrConfig)
	case len(cfg.Repos) == 0:
		return nil, fmt.Errorf("%w: Repos is empty", ErrConfig)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("%w: Interval %v is negative", ErrConfig, cfg.Interval)
	case cfg.FullEvery < 0:
		return nil, fmt.Errorf("%w: FullEvery %v is negative", ErrConfig, cfg.FullEvery)
	}
	repos, err := parseRepos("Repos", cfg.Repos)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Pruner != nil:
		cfg.BoardRepos = cfg.Pruner.repos
	case cfg.BoardRepos == nil:
		cfg.BoardRepos = cfg.Repos
	}
	board, err := parseRepos("BoardRepos", cfg.BoardRepos)
	if err != nil {
		return nil, err
	}
	onBoard := map[string]bool{}
	for _, r := range board {
		onBoard[forge.RepoKey(r.full)] = true
	}
	for _, r := range repos {
		if !onBoard[forge.RepoKey(r.full)] {
			return nil, fmt.Errorf("%w: Repos entry %q is not in BoardRepos: its cards would be removed as it syncs them", ErrConfig, r.full)
		}
	}
	s := &Sync{repos: repos}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.FullEvery == 0 {
		cfg.FullEvery = DefaultFullEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("owner", cfg.Owner)
	s.cfg = cfg
	return s, nil
}

// CheckRepos reports whether NewSync takes repos as Config.Repos: nil, or
// an error wrapping ErrConfig that names field and the first entry it
// refuses, one that forge.ParseRepo refuses or one naming a repository an
// earlier entry names. Names compare without regard to case, as GitHub
// compares them (forge.RepoKey): "acme/app" and "Acme/App" are one
// repository, whose issues would otherwise each be synced twice. An empty
// repos is nil.
func CheckRepos(field string, repos []string) error {
	_, err := parseRepos(field, repos)
	return err
}

// parseRepos is CheckRepos, returning the repositories as the sync keeps
// them.
func parseRepos(field string, repos []string) ([]boardRepo, error) {
	out := make([]boardRepo, 0, len(repos))
	seen := map[string]string{} // forge.RepoKey to the entry naming it
	for _, r := range repos {
		owner, name, err := forge.ParseRepo(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %s entry %q: %w", ErrConfig, field, r, err)
		}
		key := forge.RepoKey(r)
		if first, ok := seen[key]; ok {
			return nil, fmt.Errorf("%w: %s entry %q names the repository of entry %q: it is listed twice", ErrConfig, field, r, first)
		}
		seen[key] = r
		out = append(out, boardRepo{full: r, owner: owner, name: name})
	}
	return out, nil
}

// Interval is the time between two passes, as configured.
func (s *Sync) Interval() time.Duration { return s.cfg.Interval }

// boardTerm is what the sync keeps in memory for one term, and nothing
// outlives it: the next term starts afresh, with a full sync.
type boardTerm struct {
	term, pass int
	// watermarks holds, per repository, the latest forge updated time the
	// term has stored every card up to; absent or zero: list every issue.
	watermarks map[string]time.Time
	// fullAt holds, per repository, when the term's last full sync of it
	// began (Config.Now); absent: sync in full.
	fullAt map[string]time.Time
	// pruner removes the cards of repositories off the board: Config's
	// Pruner, shared, or the term's own.
	pruner *Pruner
}

// Work serves one term: it makes a pass every interval until ctx is done,
// the first one interval after the term starts, as the sweeper does, so a
// term that flaps costs no forge request. Its forge requests are charged
// to lane forge-board-sync.
//
// A pass lists, for each repository in order, the issues updated at or
// after the repository's watermark, stores their cards, and moves the
// watermark to the latest updated time the forge returned. The watermark
// is the forge's clock, never this replica's, so clock skew loses nothing.
// GitHub documents since as "updated after" and timestamps are whole
// seconds, so the list asks from one second before the watermark: an issue
// updated in the same second as the last one seen is listed again rather
// than missed, whether since is inclusive or not (its unchanged card is no
// change). The first pass of a term lists everything, and so does a
// repository's first pass once Config.FullEvery has passed since its last
// full sync: a full sync then removes the cards of the issues the list did
// not show (removeGone). At the term's first pass and every
// Config.FullEvery after, before the repositories, the pass removes the
// cards of repositories no longer on the board (Config.BoardRepos,
// Store.Prune) and the expired tombstones, when the store grants the
// period's claim (see Pruner). A repository whose list, store or removal fails keeps its
// watermark, so the next pass lists the same issues again; the pass goes
// on to the next repository. A rate-limit error
// stops the pass; the ticks before the limit's reset are skipped and not
// counted as passes. Config.Watchdog bounds each pass; when it ends the
// term (passes in a row that did not sync every repository), Work logs why
// and returns, and the lease is released.
func (s *Sync) Work(ctx context.Context) {
	st := &boardTerm{term: int(s.terms.Add(1)), watermarks: make(map[string]time.Time), fullAt: make(map[string]time.Time), pruner: s.cfg.Pruner}
	if st.pruner == nil {
		st.pruner = newPruner(s.cfg.Store, s.cfg.Host, s.cfg.BoardRepos, s.cfg.FullEvery)
	}
	err := lease.Every(forge.WithLane(ctx, forge.LaneBoardSync), s.cfg.Interval, s.cfg.Now,
		func(ctx context.Context) (time.Time, bool) {
			p := s.pass(ctx, st)
			return p.resume, p.synced
		},
		func(until time.Time) {
			s.cfg.Logger.Debug("board sync skipped: rate limited", "until", until)
		}, s.cfg.Watchdog)
	if err != nil {
		s.cfg.Logger.Warn("board sync: stepping down", "err", err)
	}
}

// passEnd is how a pass ended: the rate limit's reset when one stopped it
// (zero otherwise), and whether it reached every repository and synced
// each.
type passEnd struct {
	resume time.Time
	synced bool
}

// pass makes one pass of the term st and says how it ended.
func (s *Sync) pass(ctx context.Context, st *boardTerm) passEnd {
	var resume time.Time
	st.pass++
	p := Pass{Owner: s.cfg.Owner, Term: st.term, Pass: st.pass, At: s.cfg.Now(), Complete: true}
	malformed := map[string]error{}
	ctx = WithMalformed(ctx, func(id string, err error) { malformed[id] = err })
	s.prune(ctx, st, &p)
	listed, changed, leftOut, removed, failed := 0, 0, 0, 0, 0
	for _, r := range s.repos {
		if ctx.Err() != nil {
			p.Complete = false
			break
		}
		rp := s.syncRepo(ctx, st, r)
		p.Repos = append(p.Repos, rp)
		listed, changed, leftOut, removed = listed+rp.Listed, changed+rp.Changed, leftOut+rp.LeftOut, removed+rp.Removed
		if rp.Err == nil {
			continue
		}
		failed++
		if rl := (*forge.RateLimitError)(nil); errors.As(rp.Err, &rl) {
			resume = rl.Reset
			s.cfg.Logger.Warn("board sync stopped: rate limited", "repo", r.full,
				"until", resume, "err", rp.Err)
			p.Complete = false
			break
		}
		s.cfg.Logger.Warn("board sync: repository not synced", "repo", r.full,
			"since", rp.Since, "err", rp.Err)
	}
	// Once a pass, however many of its reads met it: a skipped document
	// keeps its issue off the board until the issue's next update
	// replaces it, or someone repairs or deletes it.
	for _, id := range slices.Sorted(maps.Keys(malformed)) {
		s.cfg.Logger.Warn("board sync met a card document it cannot read; repair or delete it", "card", id, "err", malformed[id])
	}
	p.Malformed = len(malformed)
	// Reported before it is logged: whoever reads the line finds the
	// pass recorded (GET /board's last complete pass, the metrics).
	if s.cfg.OnPass != nil {
		s.cfg.OnPass(p)
	}
	s.cfg.Logger.Info("board sync pass", "term", p.Term, "pass", p.Pass, "repos", len(p.Repos),
		"failed", failed, "listed", listed, "changed", changed, "left_out", leftOut, "removed", removed, "pruned", p.Pruned, "expired", p.Expired, "complete", p.Complete)
	return passEnd{resume: resume, synced: p.Complete && failed == 0}
}

// prune removes, at the term's first pass and every FullEvery after (or
// when Config.Pruner says, for every sync sharing it), once the store
// grants the period's claim, the cards of the repositories no longer on
// the board and the expired tombstones, noting in p how many cards and
// tombstones or why not.
func (s *Sync) prune(ctx context.Context, st *boardTerm, p *Pass) {
	removed, expired, ran, err := st.pruner.prune(ctx, p.At)
	if !ran {
		return
	}
	p.Pruned, p.Expired, p.PruneErr = removed, expired, err
	switch {
	case p.PruneErr != nil:
		s.cfg.Logger.Warn("board sync: cards of repositories off the board not removed", "err", p.PruneErr)
	case p.Pruned > 0:
		s.cfg.Logger.Info("board sync: cards of repositories off the board removed", "removed", p.Pruned,
			"board_repos", strings.Join(s.cfg.BoardRepos, ","))
	}
}

// syncRepo lists r's issues since its watermark, or all of them in a full
// sync, and stores their cards, moving the watermark only when every card
// was stored (and in a full sync, every card of an issue gone removed).
func (s *Sync) syncRepo(ctx context.Context, st *boardTerm, r boardRepo) RepoPass {
	since, began := st.watermarks[r.full], s.cfg.Now()
	full := st.fullAt[r.full].IsZero() || began.Sub(st.fullAt[r.full]) >= s.cfg.FullEvery
	if full {
		since = time.Time{}
	}
	rp := RepoPass{Repo: r.full, Since: since, Watermark: st.watermarks[r.full]}
	from := since
	if !from.IsZero() {
		from = from.Add(-time.Second) // the overlap: see Work
	}
	issues, err := s.cfg.Forge.ListIssues(ctx, r.owner, r.name, from)
	if err != nil {
		rp.Err = err
		return rp
	}
	rp.Listed = len(issues)
	mark := since
	for _, is := range issues {
		changed, err := s.cfg.Store.Put(ctx, s.cardOf(r, is))
		if errors.Is(err, ErrInvalid) {
			// The forge described this issue in a way GitHub's schema does
			// not allow: no card can hold it, and failing the repository
			// for it would leave every later issue of the list out on
			// every pass. It comes again when the issue is next updated.
			rp.LeftOut++
			s.cfg.Logger.Warn("board sync: issue left out", "repo", r.full, "number", is.Number, "err", err)
			continue
		}
		if err != nil {
			rp.Err = fmt.Errorf("board: board card %s: %w", CardID(s.cfg.Host, r.full, is.Number), err)
			return rp
		}
		if changed {
			rp.Changed++
		}
		if is.UpdatedAt.After(mark) {
			mark = is.UpdatedAt
		}
	}
	if full {
		if rp.Removed, err = s.removeGone(ctx, r, issues); err != nil {
			rp.Err = err
			return rp
		}
		st.fullAt[r.full] = began
	}
	st.watermarks[r.full] = mark
	rp.Watermark = mark
	return rp
}

// cardOf is the card of issue is of r.
func (s *Sync) cardOf(r boardRepo, is forge.Issue) Card {
	return Card{
		Host: s.cfg.Host, Repo: r.full, Number: is.Number, Title: is.Title, State: is.State,
		Labels: is.Labels, Assignees: is.Assignees, PullRequest: is.PullRequest, URL: is.HTMLURL,
		Updated: is.UpdatedAt,
	}
}

// removeGone removes, after a full list of r's issues, the card of every
// issue the list did not show and the forge confirms gone from r, and
// returns how many it removed. GitHub's issue list shows neither deleted
// nor transferred issues; reading each missing one tells them from an
// issue the list passed over because an edit moved it between two pages
// (Get an issue answers 301 for a transferred issue, 410 for a deleted one, or 404
// without access to where it went:
// https://docs.github.com/rest/issues/issues#get-an-issue). An issue still
// there has its card refreshed instead. The reads are one per missing
// card, once a full sync: a removed card is not read again.
//
// r's own issues may name it in another spelling, or by a new name if it
// was renamed (GitHub redirects the old one): an issue that comes back in
// a repository the list's issues named is still there, not transferred.
func (s *Sync) removeGone(ctx context.Context, r boardRepo, listed []forge.Issue) (int, error) {
	shown := make(map[int]bool, len(listed))
	here := map[string]bool{forge.RepoKey(r.full): true}
	for _, is := range listed {
		shown[is.Number] = true
		if is.Repo != "" {
			here[forge.RepoKey(is.Repo)] = true
		}
	}
	cards, err := s.cfg.Store.Cards(ctx, Query{Host: s.cfg.Host, Repo: r.full, Limit: math.MaxInt})
	if err != nil {
		return 0, fmt.Errorf("board: cards of %s to check: %w", r.full, err)
	}
	removed := 0
	for _, c := range cards {
		if shown[c.Number] {
			continue
		}
		is, err := s.cfg.Forge.GetIssue(ctx, r.owner, r.name, c.Number)
		why := "deleted"
		switch {
		case errors.Is(err, forge.ErrGone), errors.Is(err, forge.ErrNotFound):
		case err != nil:
			return removed, fmt.Errorf("board: check card %s: %w", c.ID(), err)
		case !here[forge.RepoKey(is.Repo)]:
			why = "transferred to " + is.Repo
		default:
			_, err := s.cfg.Store.Put(ctx, s.cardOf(r, is))
			if errors.Is(err, ErrInvalid) { // as in syncRepo: it comes again when next updated
				s.cfg.Logger.Warn("board sync: issue left out", "repo", r.full, "number", is.Number, "err", err)
			} else if err != nil {
				return removed, fmt.Errorf("board: board card %s: %w", c.ID(), err)
			}
			continue
		}
		// The forge's answer just said the issue is gone, so it went at
		// latest now; the card's Updated covers this replica's clock
		// running behind the forge's.
		ok, err := s.cfg.Store.Remove(ctx, s.cfg.Host, r.full, c.Number, laterOf(s.cfg.Now(), c.Updated))
		if err != nil {
			return removed, fmt.Errorf("board: remove card %s: %w", c.ID(), err)
		}
		if ok {
			removed++
			s.cfg.Logger.Info("board sync: card removed", "repo", r.full, "number", c.Number, "why", why)
		}
	}
	return removed, nil
}
