package board

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Pruner removes the cards on one host of every repository off the board
// (Store.Prune) for the Syncs that share it (Config.Pruner): at the first
// of their passes, then at the first pass each period after, however many
// syncs share it. A board whose repositories several syncs share (App
// mode: one sync per installation) so scans its store once a period, not
// once per sync and term, and syncs coming and going change nothing: the
// Pruner, not a sync's term, keeps when it last pruned. A prune that
// fails is tried again at the next pass of any of them. Safe for
// concurrent use.
type Pruner struct {
	store Store
	host  string
	repos []string
	every time.Duration

	mu sync.Mutex
	at time.Time // when the last prune that did not fail began, or the one under way; zero: none
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
	return &Pruner{store: store, host: host, repos: repos, every: every}
}

// validHost reports whether host can name a forge host: Config.Host's
// rule.
func validHost(host string) bool {
	return strings.TrimSpace(host) != "" && !strings.ContainsAny(host, "/# \t\r\n")
}

// prune runs Store.Prune for a pass begun at at, unless a prune that did
// not fail began less than the period before, or one is under way for
// another sync: ran is false then, and nothing was asked of the store.
func (p *Pruner) prune(ctx context.Context, at time.Time) (removed int, ran bool, err error) {
	p.mu.Lock()
	last := p.at
	if !last.IsZero() && at.Sub(last) < p.every {
		p.mu.Unlock()
		return 0, false, nil
	}
	p.at = at
	p.mu.Unlock()
	removed, err = p.store.Prune(ctx, p.host, p.repos)
	if err != nil {
		p.mu.Lock()
		if p.at.Equal(at) {
			p.at = last // the next pass of any sync tries again
		}
		p.mu.Unlock()
	}
	return removed, true, err
}
