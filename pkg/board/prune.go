package board

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

// Pruner removes the cards on one host of every repository off the board
// (Store.Prune), and drops the expired tombstones of removed cards
// (Store.ExpireTombstones), for the Syncs that share it (Config.Pruner):
// at the first of their passes, then at the first pass each period after,
// however many syncs share it. A board whose repositories several syncs
// share (App mode: one sync per installation) so scans its store once a
// period, not once per sync and term, and syncs coming and going change
// nothing: the Pruner, not a sync's term, keeps when it last pruned.
//
// Replicas share the period too: each prune is first claimed in the store
// (Store.ClaimPrune, for the board's repository list), and a Pruner whose
// claim another replica's beat prunes nothing until its next period. The
// replicas of one deployment so prune a host once a period between them,
// not once each; a replica with another list (a rolling change of it)
// prunes at once. A prune that fails is tried again at the next pass of
// any of the Pruner's syncs, without a new claim, and for the part that
// failed only: once the cards are removed, a retry only drops the
// tombstones, so no period scans the cards twice. Safe for concurrent use.
type Pruner struct {
	store Store
	host  string
	repos []string
	board string // the fingerprint of repos that claims name (boardPrint)
	every time.Duration

	mu sync.Mutex
	// at is when this Pruner last asked the store for a claim that was
	// answered, or is asking; zero: never.
	at time.Time
	// cards and tombs are the parts of a prune this Pruner claimed that
	// have not succeeded yet: Store.Prune and Store.ExpireTombstones,
	// which runs after it, so cards is never owed without tombs.
	cards, tombs bool
	busy         bool // a prune is under way for one of the syncs
}

// NewPruner returns the Pruner of host's board, whose repositories are
// repos (as Config.BoardRepos), in store, pruning at most once every
// every (0: DefaultFullEvery, as Config.FullEvery). Errors wrap ErrConfig
// and name the field and value.
func NewPruner(store Store, host string, repos []string, every time.Duration) (*Pruner, error) {
	switch {
	case store == nil:
		return nil, fmt.Errorf("%w: Store is nil", ErrConfig)
	case !validHost(host):
		return nil, fmt.Errorf("%w: Host %q is not a host name", ErrConfig, host)
	case len(repos) == 0:
		return nil, fmt.Errorf("%w: BoardRepos is empty", ErrConfig)
	case every < 0:
		return nil, fmt.Errorf("%w: FullEvery %v is negative", ErrConfig, every)
	}
	if err := CheckRepos("BoardRepos", repos); err != nil {
		return nil, err
	}
	if every == 0 {
		every = DefaultFullEvery
	}
	return newPruner(store, host, repos, every), nil
}

// newPruner is NewPruner for arguments already checked.
func newPruner(store Store, host string, repos []string, every time.Duration) *Pruner {
	return &Pruner{store: store, host: host, repos: repos, board: boardPrint(repos), every: every}
}

// boardPrint is the fingerprint of the board repos lists, the same for
// any order and case of the same repositories (forge.RepoKey): the
// hexadecimal SHA-256 of their keys, sorted, one a line.
func boardPrint(repos []string) string {
	keys := make([]string, len(repos))
	for i, r := range repos {
		keys[i] = forge.RepoKey(r)
	}
	slices.Sort(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\n")))
	return hex.EncodeToString(sum[:])
}

// validHost reports whether host can name a forge host: Config.Host's
// rule.
func validHost(host string) bool {
	return strings.TrimSpace(host) != "" && !strings.ContainsAny(host, "/# \t\r\n")
}

// prune runs Store.Prune and Store.ExpireTombstones for a pass begun at
// at, once the period since this Pruner's last claim is out and the store
// grants it a new one (Store.ClaimPrune), or at once after a claimed prune
// that failed, for the part of it that failed (a Store.Prune that
// succeeded is not run again under the same claim), and returns the cards
// removed and the tombstones expired.
// ran is false, and the store was asked at most for a claim,
// when it did not prune: not due, another sync's prune under way, or
// another replica's claim stands. A claim the store did not answer is
// err, and the next pass asks again.
func (p *Pruner) prune(ctx context.Context, at time.Time) (removed, expired int, ran bool, err error) {
	p.mu.Lock()
	due := p.at.IsZero() || at.Sub(p.at) >= p.every
	cards, tombs := p.cards, p.tombs
	owed := cards || tombs
	if p.busy || (!due && !owed) {
		p.mu.Unlock()
		return 0, 0, false, nil
	}
	p.busy = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.busy = false
		p.mu.Unlock()
	}()
	if !owed {
		claimed, err := p.store.ClaimPrune(ctx, p.host, p.board, at, p.every)
		if err != nil {
			return 0, 0, true, err
		}
		p.mu.Lock()
		p.at = at
		p.mu.Unlock()
		if !claimed {
			return 0, 0, false, nil
		}
		cards, tombs = true, true
	}
	if cards {
		removed, err = p.store.Prune(ctx, p.host, p.repos)
		cards = err != nil
	}
	if !cards { // tombs is owed
		expired, err = p.store.ExpireTombstones(ctx, at)
		tombs = err != nil
	}
	p.mu.Lock()
	p.cards, p.tombs = cards, tombs
	p.mu.Unlock()
	return removed, expired, true, err
}
