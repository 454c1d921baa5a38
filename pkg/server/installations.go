// App mode: which shard sweeps an installation, and which client offers a
// run.

package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// App mode's defaults (Config.SweepShards, Config.InstallationConcurrency).
const (
	// DefaultSweepShards is how many shards the App-mode groups have: with
	// 10 replicas each holds 6 or 7, and with 1,000 installations a shard
	// holds about 16.
	DefaultSweepShards = 64
	// DefaultInstallationConcurrency is how many installations one shard
	// term sweeps at once.
	DefaultInstallationConcurrency = 4
)

// InstallationShard is the shard, from 0 to shards-1, that sweeps App
// installation id in a group of shards shards: FNV-1a (64-bit) of the
// id's decimal digits, modulo shards. It is a pure function of its
// arguments, stable across processes and releases (a change would move
// every installation to another shard mid-deployment), so every replica
// agrees on it without asking the store. shards under 1 counts as 1.
func InstallationShard(id int64, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int(installationHash(id) % uint64(shards))
}

// installationHash is FNV-1a (64-bit) of id's decimal digits.
func installationHash(id int64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(id, 10))) // never fails
	return h.Sum64()
}

// passOffset is how much sooner than one interval after a shard term's
// election installation id's first pass comes, from 0 to under half the
// interval: a stable fraction of it (the high bits of the hash
// InstallationShard takes, mixed), so a term's deep first passes spread
// over the half interval before its first tick rather than reading the
// store all at once, and every one of them still comes within one tick of
// the election (the takeover bound, TTL + retry + one tick, holds) and at
// least half an interval after it (a term that flaps sooner costs
// nothing).
func passOffset(id int64, interval time.Duration) time.Duration {
	frac := float64(mix(installationHash(id))>>11) / (1 << 53) // in [0, 1)
	return time.Duration(frac * float64(interval) / 2)
}

// mix is MurmurHash3's 64-bit finalizer (fmix64): each bit of h moves
// about half the bits of the result. FNV-1a's last multiply carries an
// id's last digit into its high bits hardly at all, so without it ids
// 1 to 9 took offsets nanoseconds apart (TestPassOffsetSpreadsNeighbouringIDs).
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// appForge is App mode's forgeOf: the client of the run's installation.
// A run stored without one (recorded before App mode), or whose
// installation the App client does not know (removed, or not listed yet),
// is resolved by its repository (AppClient.ForRepo, cached).
func appForge(app *forge.AppClient) forgeOf {
	return func(ctx context.Context, run gaterun.Run) (*forge.Client, error) {
		if run.Installation != 0 {
			fc, err := app.Installation(run.Installation)
			if err == nil || !errors.Is(err, forge.ErrNotInstalled) {
				return fc, err
			}
		}
		owner, repo := ownerRepo(run)
		fc, _, err := app.ForRepo(ctx, owner, repo)
		if err != nil {
			return nil, fmt.Errorf("server: run %s: %w", run.ID, err)
		}
		return fc, nil
	}
}

// installationOf is the App installation that covers repo ("owner/name");
// 0 without an App. An unsettled stored run of repo names it, when the App
// client knows that installation (a store read every replica shares, so a
// repository costs the App's budget once, not once per replica); else it
// is resolved within OfferTimeout (AppClient.ForRepo: cached, kept current
// by the installation webhooks). An error wraps forge.ErrNotInstalled when
// no installation covers repo.
//
// Only an unsettled run is taken: the repository's unsettled runs follow it
// to the installation an installation_repositories event adds it to
// (moveRuns), while a settled run keeps the installation it settled
// under, which may since have lost the repository.
func (s *Server) installationOf(ctx context.Context, repo string) (int64, error) {
	if s.cfg.App == nil {
		return 0, nil
	}
	sctx, scancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	runs, err := s.cfg.Runs.List(sctx, gaterun.Query{Host: s.cfg.ForgeHost, Repo: repo, State: gaterun.StateUnsettled, Limit: 1})
	scancel()
	if err == nil && len(runs) == 1 && runs[0].Installation > 0 {
		if _, err := s.cfg.App.Installation(runs[0].Installation); err == nil {
			return runs[0].Installation, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OfferTimeout)
	defer cancel()
	owner, name, err := forge.ParseRepo(repo)
	if err != nil {
		return 0, fmt.Errorf("%w: repo: %w", errInvalid, err)
	}
	_, id, err := s.cfg.App.ForRepo(ctx, owner, name) // charged to forge.LaneApp
	return id, err
}

// refuseInstallation answers a run whose repository's installation
// installationOf could not give: 422 naming the repository when no
// installation covers it or the one covering it is suspended (saying
// which), else 503 with Retry-After (the forge did not say).
func (s *Server) refuseInstallation(w http.ResponseWriter, repo string, err error) {
	if errors.Is(err, forge.ErrSuspended) {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("repo %s: the installation of the GitHub App covering it is suspended; an owner of its account can unsuspend it", repo))
		return
	}
	if errors.Is(err, forge.ErrNotInstalled) {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("repo %s: no installation of the GitHub App covers it; install the App on it", repo))
		return
	}
	s.log.Warn("run refused: its repository's installation not resolved", "repo", repo, "err", err)
	s.unavailable(w, "the repository's installation not resolved; retry")
}

// followInstallations serves a shard term's installations until ctx is
// done: at once, at every interval after, and whenever wake (nil: never)
// is closed, want names the installations to serve, each with a key, and
// run(ctx, id, key) serves each in a goroutine of its own, whose ctx ends
// when want no longer names the installation or names it with another key
// (a new run starts with the new key); a run that returned on its own
// starts again at the next look (the next interval, or wake). Runs of one
// installation never
// overlap: a new run starts once the one it replaces returned (one
// stopped may still be ending, as a sweep writing the news of the drop
// its own pass made), so the old one's clean-up (sweepInstallation's
// forget) never undoes what the new one set up. It returns once every run
// has.
func followInstallations(ctx context.Context, interval time.Duration, wake func() <-chan struct{}, want func() map[int64]string, run func(ctx context.Context, id int64, key string)) {
	type running struct {
		key     string
		stop    context.CancelFunc
		done    chan struct{}
		stopped bool // kept until done, for the id's next run to wait for
	}
	runs := map[int64]running{}
	var wg sync.WaitGroup
	defer func() {
		for _, r := range runs {
			r.stop()
		}
		wg.Wait()
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	if wake == nil {
		wake = func() <-chan struct{} { return nil }
	}
	for {
		woken := wake() // before want: a change after it wakes the next round
		keys := want()
		for id, r := range runs {
			select {
			case <-r.done:
				delete(runs, id)
				continue
			default:
			}
			if key, ok := keys[id]; !ok || key != r.key {
				r.stop()
				r.stopped = true
				runs[id] = r
			}
		}
		for id, key := range keys {
			old, ok := runs[id]
			if ok && !old.stopped {
				continue
			}
			rctx, stop := context.WithCancel(ctx)
			r := running{key: key, stop: stop, done: make(chan struct{})}
			runs[id] = r
			wg.Go(func() {
				defer close(r.done)
				if ok {
					<-old.done
				}
				run(rctx, id, key)
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-woken:
		}
	}
}
