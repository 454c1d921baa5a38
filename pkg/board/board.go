// Package board is the forge board issue sync, the second net the lease
// elects (docs/design.md, the second net): it keeps one [Card] per issue and pull request of the configured
// repositories, as the forge last showed it.
//
// It holds the cards and their [Store], with two twins ([MemoryStore] and
// [MongoStore]) that pass one conformance suite,
// [iterion.dev/iterion/pkg/board/boardtest]; the [Sync], whose Work serves
// one lease term and lists each repository's issues since a watermark every
// interval ([lease.Every]), in full at a term's start and every
// Config.FullEvery, when it removes the cards of deleted and transferred
// issues and of repositories no longer on the board; and [Handler], the
// board's HTTP view. The
// package knows nothing of the merge gate: the server elects the Sync under
// its lease and serves the Handler at /board.
package board

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// ErrInvalid reports a card or query field a store cannot use; errors that
// wrap it name the field and value.
var ErrInvalid = errors.New("board: invalid")

// Card is the board's card for one forge issue or pull request, as the
// board sync last read it from the forge.
//
// Updated is the forge's updated_at, UTC truncated to the millisecond as
// the stores keep it. Empty Labels and Assignees read back as nil.
type Card struct {
	// Host is the forge host, e.g. "github.com".
	Host string
	// Repo is "owner/name", as the sync was configured with it: the name
	// shown. The card's ID holds its [forge.RepoKey].
	Repo string
	// Number is the issue or pull request number, at least 1.
	Number int
	// Title is the title.
	Title string
	// State is "open" or "closed".
	State string
	// Labels are label names; Assignees are user logins; both in the forge's order.
	Labels    []string
	Assignees []string
	// PullRequest is true for a pull request, false for a plain issue.
	PullRequest bool
	// URL is the web page; may be empty.
	URL string
	// Updated is when the forge last changed the issue.
	Updated time.Time
}

// ID is the card's key in a Store: host, repo and number, as in
// "github.com/acme/app#12" (see CardID).
func (c Card) ID() string { return CardID(c.Host, c.Repo, c.Number) }

// CardID is the key of the card for issue number of repo on host. The
// repository enters by its [forge.RepoKey], so names that differ only in
// case, which GitHub takes for one repository, give one card:
// "Acme/App" and "acme/app" both key "github.com/acme/app#12".
func CardID(host, repo string, number int) string {
	return legacyCardID(host, forge.RepoKey(repo), number)
}

// legacyCardID is the key a release before CardID's lower-casing gave the
// card: the repository as configured. MongoStore reads and migrates
// documents stored under it.
func legacyCardID(host, repo string, number int) string {
	return fmt.Sprintf("%s/%s#%d", host, repo, number)
}

// Validate reports the first field of c a board store would refuse, as an
// error wrapping ErrInvalid that names the field and value; nil when c is
// whole.
func (c Card) Validate() error {
	if err := checkKey(c.Host, c.Repo, c.Number); err != nil {
		return err
	}
	switch {
	case c.State != "open" && c.State != "closed":
		return fmt.Errorf("%w: state %q is not open or closed", ErrInvalid, c.State)
	case c.Updated.IsZero():
		return fmt.Errorf("%w: updated %v is zero", ErrInvalid, c.Updated)
	}
	return nil
}

// checkKey reports the first of host, repo and number, a card's key, that
// a board store would refuse, as an error wrapping ErrInvalid.
func checkKey(host, repo string, number int) error {
	switch err := checkHost(host); {
	case err != nil:
		return err
	case !validRepo(repo):
		return fmt.Errorf("%w: repo %q is not owner/name", ErrInvalid, repo)
	case number < 1:
		return fmt.Errorf("%w: number %d is not an issue number", ErrInvalid, number)
	}
	return nil
}

// checkHost reports a host a board store would refuse, as an error
// wrapping ErrInvalid.
func checkHost(host string) error {
	if strings.TrimSpace(host) == "" || strings.ContainsAny(host, "/# \t\r\n") {
		return fmt.Errorf("%w: host %q is not a host name", ErrInvalid, host)
	}
	return nil
}

// validRepo reports whether repo follows the forge's repository-name rule.
func validRepo(repo string) bool {
	_, _, err := forge.ParseRepo(repo)
	return err == nil
}

// stamped is c as the stores keep it: Updated stamped, empty lists nil,
// lists copied so the caller's slices are never shared.
func (c Card) stamped() Card {
	c.Updated = mongostore.Stamp(c.Updated)
	c.Labels, c.Assignees = cloneOrNil(c.Labels), cloneOrNil(c.Assignees)
	return c
}

func cloneOrNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// sameCard reports whether a and b, both stamped, are the same card.
func sameCard(a, b Card) bool {
	return a.Host == b.Host && a.Repo == b.Repo && a.Number == b.Number && a.Title == b.Title &&
		a.State == b.State && slices.Equal(a.Labels, b.Labels) && slices.Equal(a.Assignees, b.Assignees) &&
		a.PullRequest == b.PullRequest && a.URL == b.URL && a.Updated.Equal(b.Updated)
}

// Query selects cards; an empty Host, Repo or State matches any. Repo
// matches without regard to case, as GitHub compares names
// ([forge.RepoKey]).
type Query struct {
	Host, Repo, State string
	// Limit is the most cards returned, at least 1.
	Limit int
}

func (q Query) check() error {
	if q.Limit < 1 {
		return fmt.Errorf("%w: limit %d is under 1", ErrInvalid, q.Limit)
	}
	if q.State != "" && q.State != "open" && q.State != "closed" {
		return fmt.Errorf("%w: state %q is not open or closed", ErrInvalid, q.State)
	}
	return nil
}

func (q Query) matches(c Card) bool {
	return (q.Host == "" || c.Host == q.Host) && (q.Repo == "" || forge.RepoKey(c.Repo) == forge.RepoKey(q.Repo)) &&
		(q.State == "" || c.State == q.State)
}

// compareCards is the board's order: most recently updated first, then by
// ID.
func compareCards(a, b Card) int {
	return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.ID(), b.ID()))
}

// ErrMalformed reports a stored card document of the wrong shape (wrapped,
// naming the document's _id and the field at fault). Cards skips such a
// document and Put of its card replaces it, each telling ctx's
// WithMalformed function; only a store that can hold one (MongoStore)
// does.
var ErrMalformed = errors.New("board: malformed card document")

// Store keeps the board's cards, one per Card.ID, so one per issue
// whatever the case of its repository's name: a Put under another
// spelling is the same card, and the Repo it carries is the name shown.
// Implementations are safe for concurrent use, keep Updated in UTC
// truncated to the millisecond, and pass the conformance suite in package
// boardtest. An error means the call may or may not have landed.
type Store interface {
	// Put stores c unless the store keeps a card with the same ID updated
	// later: an older read of an issue (a replica overlapping its
	// successor, say) never overwrites a newer one. Nor does a read of a
	// removed card's issue from before its removal (see Remove). changed
	// reports whether the stored card changed: it was new, or a field
	// differs. A card that fails Validate is refused with an error
	// wrapping ErrInvalid, and nothing is written.
	Put(ctx context.Context, c Card) (changed bool, err error)
	// Cards returns at most q.Limit cards that match q, most recently
	// updated first (ties by ID). A q.Limit under 1 or an unknown q.State
	// is refused with an error wrapping ErrInvalid. A stored document it
	// cannot read as a card is skipped, told to ctx's WithMalformed
	// function, and the page filled from the cards after it.
	Cards(ctx context.Context, q Query) ([]Card, error)
	// Remove deletes the card of issue number of repo on host (the repo
	// compared without regard to case, as CardID keys it), for an issue
	// the forge no longer has there since gone (on the forge's clock, or
	// any instant after: not before the last update), and leaves
	// its tombstone: a later Put of that card updated at or before gone,
	// or before the card removed, changes nothing, so a sync pass that
	// read the issue before it went cannot put its card back after the
	// removal. A card updated later is stored again. removed reports
	// whether there was a card; the tombstone is left either way, as the
	// racing pass may not have stored it yet. Each Remove drops the
	// tombstones whose gone is more than TombstoneTTL before its own, and
	// only those, so they never outnumber the removals of one
	// TombstoneTTL. A host, repo or number Validate would refuse, or a
	// zero gone, is refused with an error wrapping ErrInvalid.
	Remove(ctx context.Context, host, repo string, number int, gone time.Time) (removed bool, err error)
	// Prune deletes the card of every issue on host whose repository is
	// none of repos (compared without regard to case), for repositories no
	// longer on the board, and returns how many it deleted. Cards of other
	// hosts, and tombstones, are kept. A host or an entry of repos
	// Validate would refuse is refused with an error wrapping ErrInvalid.
	Prune(ctx context.Context, host string, repos []string) (removed int, err error)
	// ClaimPrune claims, for a replica about to prune host at at, the
	// period of every that begins then: it records the claim and reports
	// claimed, unless host's last claim is of the same board and was
	// made less than every before at, or after it by at most every (a
	// last claim further ahead, of a clock that far off or written by
	// hand, bounds no period and is taken over), so replicas that
	// share the store and the board prune once a period between them,
	// whichever asks first. board names the pruner's repository list (an
	// opaque fingerprint, see Pruner): a claim for another list wins at
	// once, so a replica whose list changed prunes without waiting out a
	// period of the old one's. An empty host or board, a host Validate
	// would refuse, or an every under 1 is refused with an error wrapping
	// ErrInvalid.
	ClaimPrune(ctx context.Context, host, board string, at time.Time, every time.Duration) (claimed bool, err error)
	// ExpireTombstones drops the tombstones, of any host, whose gone is
	// more than TombstoneTTL before now, and only those, and returns how
	// many: the periodic prune's bound on tombstones when no Remove comes
	// to drop them. Cards are kept. A zero now is refused with an error
	// wrapping ErrInvalid.
	ExpireTombstones(ctx context.Context, now time.Time) (dropped int, err error)
}

// checkClaim reports the first of ClaimPrune's arguments it refuses, as an
// error wrapping ErrInvalid.
func checkClaim(host, board string, at time.Time, every time.Duration) error {
	switch err := checkHost(host); {
	case err != nil:
		return err
	case board == "":
		return fmt.Errorf("%w: board %q is empty", ErrInvalid, board)
	case at.IsZero():
		return fmt.Errorf("%w: at %v is zero", ErrInvalid, at)
	case every < 1:
		return fmt.Errorf("%w: every %v is under 1ns", ErrInvalid, every)
	}
	return nil
}

// expiryOf is the instant before which a tombstone's gone is expired at
// now (TombstoneTTL), or a zero now refused.
func expiryOf(now time.Time) (time.Time, error) {
	if now.IsZero() {
		return time.Time{}, fmt.Errorf("%w: now %v is zero", ErrInvalid, now)
	}
	return mongostore.Stamp(now).Add(-TombstoneTTL), nil
}

// checkPrune reports the first of host and repos that Prune refuses, as an
// error wrapping ErrInvalid, and returns repos' keys (forge.RepoKey).
func checkPrune(host string, repos []string) (map[string]bool, error) {
	if err := checkHost(host); err != nil {
		return nil, err
	}
	keep := make(map[string]bool, len(repos))
	for _, r := range repos {
		if !validRepo(r) {
			return nil, fmt.Errorf("%w: repo %q is not owner/name", ErrInvalid, r)
		}
		keep[forge.RepoKey(r)] = true
	}
	return keep, nil
}

// TombstoneTTL is how long a store keeps a removed card's tombstone
// (Store.Remove), counted from the removal's gone. It need only outlive the
// sync passes in flight when the card was removed, each bounded by the
// sync's interval, and a lease term overlapping its successor's; a day is
// far more than either, and as long as a full sync's default period
// (DefaultFullEvery), which would remove a card put back anyway. A
// tombstone is dropped by the first Remove or periodic prune
// (Store.ExpireTombstones, at most a Pruner's period apart) after it
// expires, so none outlives TombstoneTTL and that period.
const TombstoneTTL = 24 * time.Hour

// tombstone is what a store keeps of a removed card: when the forge
// removed the issue, and the earliest Updated a Put of its card must have
// to be stored (after gone, and not before the card removed).
type tombstone struct {
	gone, bar time.Time
}

// newTombstone is the tombstone of a removal at gone (stamped), of a card
// updated at removed (zero: no card) and whose earlier tombstone was old
// (zero: none): the later of the three bars, and the later gone.
func newTombstone(gone, removed time.Time, old tombstone) tombstone {
	bar := gone.Add(time.Millisecond) // the stores' precision: updated at gone is not after it
	return tombstone{gone: laterOf(gone, old.gone), bar: laterOf(laterOf(bar, removed), old.bar)}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkGone reports a zero gone as an error wrapping ErrInvalid.
func checkGone(gone time.Time) error {
	if gone.IsZero() {
		return fmt.Errorf("%w: gone %v is zero", ErrInvalid, gone)
	}
	return nil
}

// MemoryStore is the in-memory Store twin, for a single process
// and for tests. The zero value is ready to use; it is safe for concurrent
// use.
type MemoryStore struct {
	mu     sync.Mutex
	cards  map[string]Card
	tombs  map[string]tombstone // by Card.ID
	claims map[string]claim     // ClaimPrune's, by host
}

// claim is the last ClaimPrune a store granted for a host.
type claim struct {
	board string
	at    time.Time
}

// grants reports whether a ClaimPrune for board at at wins over c, the
// host's last: another board's, one made at least every before at, or one
// more than every after it.
func (c claim) grants(board string, at time.Time, every time.Duration) bool {
	return c.board != board || !c.at.After(at.Add(-every)) || c.at.After(at.Add(every))
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Put implements Store.
func (s *MemoryStore) Put(ctx context.Context, c Card) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("board: put card: %w", err)
	}
	if err := c.Validate(); err != nil {
		return false, err
	}
	c = c.stamped()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cards == nil {
		s.cards = make(map[string]Card)
	}
	if t, ok := s.tombs[c.ID()]; ok {
		if c.Updated.Before(t.bar) {
			return false, nil
		}
		delete(s.tombs, c.ID())
	}
	old, ok := s.cards[c.ID()]
	if ok && (old.Updated.After(c.Updated) || sameCard(old, c)) {
		return false, nil
	}
	s.cards[c.ID()] = c
	return true, nil
}

// Cards implements Store.
func (s *MemoryStore) Cards(ctx context.Context, q Query) ([]Card, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("board: list cards: %w", err)
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []Card
	for _, c := range s.cards {
		if q.matches(c) {
			out = append(out, c.stamped()) // a copy: callers never share the stored lists
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, compareCards)
	return out[:min(q.Limit, len(out))], nil
}

// Remove implements Store.
func (s *MemoryStore) Remove(ctx context.Context, host, repo string, number int, gone time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("board: remove card: %w", err)
	}
	if err := checkKey(host, repo, number); err != nil {
		return false, err
	}
	if err := checkGone(gone); err != nil {
		return false, err
	}
	gone = mongostore.Stamp(gone)
	id := CardID(host, repo, number)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tombs == nil {
		s.tombs = make(map[string]tombstone)
	}
	s.expire(gone.Add(-TombstoneTTL))
	c, ok := s.cards[id]
	s.tombs[id] = newTombstone(gone, c.Updated, s.tombs[id])
	delete(s.cards, id)
	return ok, nil
}

// Prune implements Store.
func (s *MemoryStore) Prune(ctx context.Context, host string, repos []string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("board: prune cards: %w", err)
	}
	keep, err := checkPrune(host, repos)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	removed := 0
	for id, c := range s.cards {
		if c.Host == host && !keep[forge.RepoKey(c.Repo)] {
			delete(s.cards, id)
			removed++
		}
	}
	return removed, nil
}

// expire drops the tombstones whose gone is before cutoff and returns how
// many; s.mu is held.
func (s *MemoryStore) expire(cutoff time.Time) int {
	n := 0
	for id, t := range s.tombs {
		if t.gone.Before(cutoff) {
			delete(s.tombs, id)
			n++
		}
	}
	return n
}

// ClaimPrune implements Store.
func (s *MemoryStore) ClaimPrune(ctx context.Context, host, board string, at time.Time, every time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("board: claim prune: %w", err)
	}
	if err := checkClaim(host, board, at, every); err != nil {
		return false, err
	}
	at = mongostore.Stamp(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.claims[host]; ok && !last.grants(board, at, every) {
		return false, nil
	}
	if s.claims == nil {
		s.claims = make(map[string]claim)
	}
	s.claims[host] = claim{board: board, at: at}
	return true, nil
}

// ExpireTombstones implements Store.
func (s *MemoryStore) ExpireTombstones(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("board: expire tombstones: %w", err)
	}
	cutoff, err := expiryOf(now)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expire(cutoff), nil
}
