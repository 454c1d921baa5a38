// App mode's board sync: the lease group forge-board-sync, whose shard
// terms sync the board repositories of the installations InstallationShard
// gives them, each through its installation's client.

package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/lease"
)

// installationBoards is the App-mode board sync. Its board repositories
// are resolved to their installations (AppClient.ForRepo, cached) once an
// interval by resolve; a shard term runs one board.Sync per installation
// of its shard that covers board repositories. Safe for concurrent use.
type installationBoards struct {
	s        *Server
	app      *forge.AppClient
	shards   int
	interval time.Duration
	// pruner removes the cards of repositories off the board for every
	// installation's sync of this replica, whatever its shard: once a
	// --board-full-sync-every, not once per installation and term, each
	// a scan of the card collection; and, by its claim in the store,
	// once a period between all the replicas of one --board-repos.
	pruner *board.Pruner

	mu     sync.Mutex
	byInst map[int64][]string // board repositories by installation, sorted
}

// run resolves the board repositories every interval and serves the group
// forge-board-sync of b.shards shards until ctx is done; its TTL and retry
// are the single board lease's.
func (b *installationBoards) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(b.interval)
		defer t.Stop()
		for {
			b.resolve(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	l := ForgeBoardSync()
	err := lease.RunGroup(ctx, b.s.cfg.Leases, lease.GroupSpec{
		Name: l.Name, Owner: b.s.cfg.Owner, Shards: b.shards,
		TTL: l.TTL(b.interval), Retry: l.Retry(b.interval),
		Logger: b.s.cfg.Logger, Health: b.s.health, OnEvent: b.s.leaseEvent,
	}, b.shardTerm)
	if err != nil {
		b.s.log.Error("elected group not started", "lease", l.Name, "err", err)
	}
}

// resolve finds the installation of every board repository, within
// OfferTimeout each. A repository no installation covers, or one the
// forge did not answer for, is logged and left out until it resolves.
func (b *installationBoards) resolve(ctx context.Context) {
	byInst := map[int64][]string{}
	for _, repo := range b.s.cfg.BoardRepos {
		owner, name, _ := forge.ParseRepo(repo) // New validated it
		rctx, cancel := context.WithTimeout(ctx, b.s.cfg.OfferTimeout)
		_, id, err := b.app.ForRepo(rctx, owner, name)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				b.s.log.Warn("board: repository not synced: its installation not resolved", "repo", repo, "err", err)
			}
			continue
		}
		byInst[id] = append(byInst[id], repo)
	}
	for _, repos := range byInst {
		slices.Sort(repos)
	}
	b.mu.Lock()
	b.byInst = byInst
	b.mu.Unlock()
}

// reposOf is the board repositories of the installations shard syncs,
// joined by commas: followInstallations's keys.
func (b *installationBoards) reposOf(shard int) map[int64]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int64]string{}
	for id, repos := range b.byInst {
		if InstallationShard(id, b.shards) == shard {
			out[id] = strings.Join(repos, ",")
		}
	}
	return out
}

// shardTerm serves one term of shard: at its start and every interval
// after, it runs a board sync for each installation of the shard with
// board repositories (its first pass one interval later, in full), and
// restarts or stops those whose repositories changed or left
// (followInstallations). A sync's watchdog is its installation's, named
// after it on /healthz ("forge-board-sync installation <id>"):
// stallPasses failed passes in a row end that sync alone, which the next
// interval starts again afresh.
func (b *installationBoards) shardTerm(ctx context.Context, shard int) {
	followInstallations(ctx, b.interval, nil, func() map[int64]string { return b.reposOf(shard) },
		func(ctx context.Context, id int64, repos string) {
			if bs := b.newSync(id, strings.Split(repos, ",")); bs != nil {
				bs.Work(ctx)
			}
		})
}

// newSync is installation id's board sync of repos through its client;
// nil, logged, when the App no longer knows it.
func (b *installationBoards) newSync(id int64, repos []string) *board.Sync {
	fc, err := b.app.Installation(id)
	if err == nil {
		var bs *board.Sync
		l := ForgeBoardSync()
		bs, err = board.NewSync(board.Config{
			Store: b.s.cfg.Board, Forge: suspensionChecked{b, id, fc}, Host: b.s.cfg.ForgeHost, Repos: repos, Pruner: b.pruner,
			Interval: b.interval, FullEvery: b.s.cfg.BoardFullEvery, Owner: b.s.cfg.Owner, Now: b.s.cfg.Now, Logger: b.s.cfg.Logger.With("installation", id),
			OnPass: b.s.passes.boardPass(b.s.cfg.Now, b.s.boardPassed),
			Watchdog: lease.Watchdog{Name: fmt.Sprintf("%s installation %d", l.Name, id), PassTimeout: b.interval, StallAfter: stallPasses, Health: b.s.health,
				TimedOut: b.s.passes.timeouts.WithLabelValues(l.Name).Inc, Stalled: b.s.passes.stalls.WithLabelValues(l.Name).Inc},
		})
		if err == nil {
			return bs
		}
	}
	b.s.log.Warn("board: installation's repositories not synced", "installation", id, "repos", strings.Join(repos, ","), "err", err)
	return nil
}

// suspensionChecked is installation id's board.IssueReader in App mode:
// its client, fc, but a read GitHub refused for the installation's
// suspension with a token minted before it (forge.SuspendedTokenError)
// has the installation checked as the sweeper has it
// (installationSweeps.checkRefused), and once the App client no longer
// knows the installation (dropped so, or by a webhook or a re-list) a
// read fails with forge.ErrNotInstalled without a request: the pass's
// next repository would otherwise ask for a token GitHub refuses.
type suspensionChecked struct {
	b  *installationBoards
	id int64
	fc *forge.Client
}

var _ board.IssueReader = suspensionChecked{}

func (r suspensionChecked) ListIssues(ctx context.Context, owner, repo string, since time.Time) ([]forge.Issue, error) {
	if _, err := r.b.app.Installation(r.id); err != nil {
		return nil, err
	}
	out, err := r.fc.ListIssues(ctx, owner, repo, since)
	r.refused(ctx, err)
	return out, err
}

func (r suspensionChecked) GetIssue(ctx context.Context, owner, repo string, number int) (forge.Issue, error) {
	if _, err := r.b.app.Installation(r.id); err != nil {
		return forge.Issue{}, err
	}
	is, err := r.fc.GetIssue(ctx, owner, repo, number)
	r.refused(ctx, err)
	return is, err
}

// refused checks the installation when err is a read refused for its
// suspension.
func (r suspensionChecked) refused(ctx context.Context, err error) {
	if !errors.As(err, new(*forge.SuspendedTokenError)) {
		return
	}
	r.b.s.sweeps.checkRefused(ctx, r.b.s.log.With("installation", r.id), r.id, "board sync", "a read made with the installation's token")
}
