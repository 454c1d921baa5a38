package server_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// TestAppModeAnInstallationAddedMidTermIsSweptAtOnce pins how soon a shard
// term sweeps an installation created mid-term (no latency here, so a pass
// takes no virtual time):
//   - the webhook reaches the shard's holder: the first pass, deep, comes
//     at once, not one interval later (decision 3's interval is a term's,
//     not an installation's);
//   - the webhook reaches another replica: the holder learns it at its next
//     listing of the lease store, re-lists at that tick even though it
//     re-listed half an interval before (for a webhook of an unknown
//     installation), and sweeps at once: within one interval of the
//     webhook.
func TestAppModeAnInstallationAddedMidTermIsSweptAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(5*interval + interval/2) // the two replicas settle to a shard each; half an interval to their next tick
		synctest.Wait()

		if err := c.sim.AddInstallation(3, "org-3", appRepo(3)); err != nil {
			t.Fatal(err)
		}
		seedAppPull(t, c, 3, true)
		added := time.Now()
		if code, body := holderOf(t, c, shards, 3).call(t, "POST", "/webhooks/github", "installation", installationEvent("created", 3)); code != http.StatusOK {
			t.Fatalf("installation created webhook: %d %s, want 200", code, body)
		}
		synctest.Wait()
		if passes := sweptBy(c, 3); len(passes) == 0 || !passes[0].At.Equal(added) || !passes[0].Deep {
			t.Errorf("installation 3 added at %v through its shard's holder: passes %+v, want a deep one at once", added, passes)
		}

		// The holder of installation 5's shard looks an unknown
		// installation up (a re-list), then hears of 5 through the lease
		// store only.
		holder := holderOf(t, c, shards, 5)
		if err := c.sim.AddInstallation(4, "org-4", appRepo(4)); err != nil {
			t.Fatal(err)
		}
		seedAppPull(t, c, 4, true)
		if code, body := holder.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(4)); code != http.StatusAccepted {
			t.Fatalf("pull_request webhook of unknown installation 4: %d %s, want 202", code, body)
		}
		synctest.Wait()
		if _, err := holder.app.Installation(4); err != nil {
			t.Fatalf("installation 4 after its webhook: %v, want it looked up", err)
		}
		if err := c.sim.AddInstallation(5, "org-5", appRepo(5)); err != nil {
			t.Fatal(err)
		}
		seedAppPull(t, c, 5, true)
		added = time.Now()
		if code, body := notSweeping(t, c, shards, 5).call(t, "POST", "/webhooks/github", "installation", installationEvent("created", 5)); code != http.StatusOK {
			t.Fatalf("installation created webhook: %d %s, want 200", code, body)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		if passes := sweptBy(c, 5); len(passes) == 0 || passes[0].At.After(added.Add(interval)) || !passes[0].Deep {
			t.Errorf("installation 5 added at %v through another replica: passes %+v, want a deep one within 1 interval: the holder's next listing, its re-list and the pass at once", added, passes)
		}
	})
}

// TestAppModeATermSpreadsItsInstallationsFirstPasses pins the cadence of a
// shard term's own installations: each one's first pass, deep, comes one
// interval after the term's election less its offset (PassOffset, under
// half an interval), so within the first tick, its next one interval after
// that, and the term's deep first passes do not all read the store at one
// instant.
func TestAppModeATermSpreadsItsInstallationsFirstPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, shards = time.Minute, 8, 2
		c, next := newAppCluster(t, n, true)
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(3 * interval)
		synctest.Wait()
		elected := map[int]time.Time{}
		for _, e := range shardTerms(c) {
			if _, ok := elected[e.Shard]; !ok {
				elected[e.Shard] = e.At
			}
		}
		instants := map[time.Time]bool{}
		for id := int64(1); id <= n; id++ {
			start, ok := elected[server.InstallationShard(id, shards)]
			if !ok {
				t.Fatalf("installation %d: its shard never elected: %+v", id, shardTerms(c))
			}
			off := server.PassOffset(id, interval)
			if off < 0 || off >= interval/2 {
				t.Errorf("installation %d: offset %v, want in [0, half an interval)", id, off)
			}
			passes := sweptBy(c, id)
			if len(passes) > 0 {
				instants[passes[0].At] = true
			}
			want := start.Add(interval - off)
			if len(passes) < 2 || !passes[0].At.Equal(want) || !passes[0].Deep || !passes[1].At.Equal(want.Add(interval)) {
				t.Errorf("installation %d: passes %+v, want a deep one at %v (one interval less its offset after its shard's election at %v), the next one interval later",
					id, passes, want, start)
			}
		}
		if len(instants) < n/2 {
			t.Errorf("the term's %d installations' first passes came at %d instants, want at least %d: spread over the interval", n, len(instants), n/2)
		}
	})
}

// TestAppModeOneReplicaSweepsFortyInstallationsEveryInterval pins the
// tenants scenario's gap goal in virtual time, where the machine's load
// plays no part: one replica holding every shard of 16 sweeps each of 40
// installations under GitHub's latency model once an interval, from its
// first pass on (no gap over 1.5 intervals, the goal), its passes spread
// or not.
func TestAppModeOneReplicaSweepsFortyInstallationsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, shards = time.Minute, 40, 16
		c, next := newAppCluster(t, n, true, forgesim.WithLatency(forgesim.GitHubLatency()))
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(14 * interval)
		synctest.Wait()
		for id := int64(1); id <= n; id++ {
			passes := sweptBy(c, id)
			if len(passes) < 12 {
				t.Errorf("installation %d: %d passes in 14 intervals, want one an interval from the second on", id, len(passes))
			}
			for i := 1; i < len(passes); i++ {
				if gap := passes[i].At.Sub(passes[i-1].At); gap > interval+interval/2 {
					t.Errorf("installation %d: %v between passes %d and %d, want at most 1.5 intervals", id, gap, i, i+1)
				}
			}
		}
	})
}

// TestAppModeAnInstallationAReListFindsIsSweptAtOnce pins
// docs/operating.md's "at once when a webhook or a re-list changed them"
// for the hourly re-list: an installation created with no webhook
// reaching any replica is swept as soon as its shard's holder's re-list
// finds it, not at the shard term's next tick (up to an interval later).
// The interval, 7 minutes, does not divide the hour, so the re-list does
// not fall on a tick.
func TestAppModeAnInstallationAReListFindsIsSweptAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = 7 * time.Minute, 1
		c, next := newAppCluster(t, 1, true)
		started := time.Now()
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		if err := c.sim.AddInstallation(2, "org-2", appRepo(2)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour + interval - time.Since(started))
		synctest.Wait()
		relisted := started.Add(forge.DefaultRelistEvery)
		if passes := sweptBy(c, 2); len(passes) == 0 || !passes[0].At.Equal(relisted) || !passes[0].Deep {
			t.Errorf("installation 2, created without a webhook: passes %+v, want a deep one at the re-list, %v", passes, relisted)
		}
	})
}

// TestAppModeARunUnderAnInstallationItsShardsHolderDoesNotKnowIsSwept
// pins the path of a run stored under an installation its shard's holder
// has not heard of: the installation's created webhook was lost, and
// another replica learned it from a repository's look-up (as its POST
// /api/runs does, whose offer then failed and left the run to the
// sweeper). That replica tells the others at its next tick (an
// installed news lease), the holder applies it at its own next tick and
// sweeps the installation at once: the run's status is published by the
// holder, through the installation's token, within two intervals of the
// look-up, without a list of the App's installations (not at the
// holder's hourly re-list, nor by the adopter, whose holder skips an
// installation it knows).
func TestAppModeARunUnderAnInstallationItsShardsHolderDoesNotKnowIsSwept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 4
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		// The replicas settle to their shards; half an interval to their
		// next tick, and 4.5 to the adopter's next pass.
		time.Sleep(5*interval + interval/2)
		synctest.Wait()

		if err := c.sim.AddInstallation(3, "org-3", appRepo(3)); err != nil {
			t.Fatal(err)
		}
		holder, other := holderOf(t, c, shards, 3), notSweeping(t, c, shards, 3)
		lists := c.sim.Requests(forgesim.Filter{Route: listRoute})
		if _, id, err := other.app.ForRepo(context.Background(), "org-3", "repo-1"); err != nil || id != 3 {
			t.Fatalf("%s: ForRepo(org-3/repo-1) = %d, %v; want installation 3", other.owner, id, err)
		}
		seedAppPull(t, c, 3, true)
		found := time.Now()
		time.Sleep(2*interval + time.Second)
		synctest.Wait()
		if got := requestsBy(c.sim, 3, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("statuses written with installation 3's tokens two intervals after %s found it: %d, want 1: the holder of its shard sweeps the run", other.owner, got)
		}
		for _, p := range sweptBy(c, 3) {
			if p.Owner != holder.owner || p.At.After(found.Add(2*interval)) {
				t.Errorf("installation 3 swept by %s at %v, want by its shard's holder %s within 2 intervals of %v", p.Owner, p.At, holder.owner, found)
			}
		}
		if n := c.sim.Requests(forgesim.Filter{Route: listRoute}) - lists; n != 0 {
			t.Errorf("lists of the App's installations meanwhile: %d, want none: the news says what was found", n)
		}
	})
}

// TestAppModeATakeoverSweepsEachInstallationWithinOneTickThoughItsTokensAreMinted
// pins decision 3's bound on a shard term's first passes, and with it the
// takeover bound (TTL + retry + one tick of a crash), when the new holder
// must mint its installations' tokens, each mint taking GitHub's time
// (here a second, and nothing else takes any) and the App's JWT minting
// one at a time (forge.AppClient): every installation's first pass comes
// no sooner than half an interval after its shard's election and no
// later than one interval after it, so within TTL + retry + one interval
// of the crash. The 40 mints take 40 seconds, within the interval: the
// term mints ahead of its first passes (mintAhead) rather than each pass
// waiting, at its own instant, behind the mints of those due before it.
// The crashed holder is its leases, left to expire unrenewed.
func TestAppModeATakeoverSweepsEachInstallationWithinOneTickThoughItsTokensAreMinted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, shards = time.Minute, 40, 2
		ctx := context.Background()
		c, next := newAppCluster(t, n, true, forgesim.WithLatency(forgesim.Latency{REST: map[string]time.Duration{mintRoute: time.Second}}))
		l := server.MergeGateSweeper()
		crashed := time.Now()
		dead := []string{lease.MemberName(l.Name, shards, "crashed")}
		for i := range shards {
			dead = append(dead, lease.ShardName(l.Name, shards, i))
		}
		for _, name := range dead {
			if ok, err := c.leases.Acquire(ctx, name, "crashed", crashed, l.TTL(interval)); err != nil || !ok {
				t.Fatalf("Acquire(%s) = %v, %v", name, ok, err)
			}
		}
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		defer c.stopAll()
		bound := crashed.Add(l.TTL(interval) + l.Retry(interval) + interval)
		time.Sleep(bound.Sub(crashed) + interval)
		synctest.Wait()

		elected := map[int]time.Time{}
		for _, e := range shardTerms(c) {
			if _, ok := elected[e.Shard]; !ok {
				elected[e.Shard] = e.At
			}
		}
		for id := int64(1); id <= n; id++ {
			start, ok := elected[server.InstallationShard(id, shards)]
			if !ok {
				t.Fatalf("installation %d: its shard never elected: %+v", id, shardTerms(c))
			}
			passes := sweptBy(c, id)
			if len(passes) == 0 {
				t.Errorf("installation %d: no pass by %v after the crash", id, time.Since(crashed))
				continue
			}
			if at := passes[0].At; at.Before(start.Add(interval/2)) || at.After(start.Add(interval)) || at.After(bound) || !passes[0].Deep {
				t.Errorf("installation %d: first pass %v after its shard's election (%v after the crash), want a deep one from half an interval to one interval after the election, and within TTL + retry + one interval (%v) of the crash",
					id, at.Sub(start), at.Sub(crashed), bound.Sub(crashed))
			}
		}
		if got := c.sim.Requests(forgesim.Filter{Route: mintRoute}); got != n {
			t.Errorf("token mints: %d, want %d, one per installation (setup)", got, n)
		}
	})
}

// TestAppModeAReplicaStoppedWhileMintingAheadReturnsOnceTheMintIsAnswered
// pins that a shard term's mints ahead of its first passes (mintAhead) are
// part of the term: a replica stopped while one is sent returns from Run
// once GitHub answered it (the JWT's gate waits for an answer sent), so
// every request it made is in the counts its forge client had when Run
// returned (the hourly line Close writes), none answered after.
func TestAppModeAReplicaStoppedWhileMintingAheadReturnsOnceTheMintIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, mint = time.Minute, 4, 5 * time.Second
		c, next := newAppCluster(t, n, false, forgesim.WithLatency(forgesim.Latency{REST: map[string]time.Duration{mintRoute: mint}}))
		startAppReplicas(t, c, next, 1, interval, 1, nil)
		r := c.replicas[0]
		for c.sim.Requests(forgesim.Filter{Route: mintRoute}) == 0 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		if len(shardTerms(c)) == 0 {
			t.Fatalf("a mint before the shard's election: %+v", c.sim.Stats())
		}
		r.stop()
		total := func() (sum int64) {
			for _, k := range r.app.Counts() {
				sum += k.N
			}
			return sum
		}
		stopped := total()
		time.Sleep(3 * mint)
		synctest.Wait()
		if got := total(); got != stopped {
			t.Errorf("requests counted by %s's forge client: %d when Run returned, %d %v later: a mint ahead was answered after the replica stopped", r.owner, stopped, got, 3*mint)
		}
	})
}

// TestAppModeATermMintsAheadForTheInstallationsItLearnsBeforeTheirFirstPass
// pins mintAhead's start for installations a shard term learns of after
// its election but before their first pass is due (here the start-up
// list, which GitHub answers 8 s after the election): their tokens are
// minted as soon as the term has them, all before the first of those
// passes (no sooner than half an interval after the election), not each
// at its own pass.
func TestAppModeATermMintsAheadForTheInstallationsItLearnsBeforeTheirFirstPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, list = time.Minute, 8, 8 * time.Second
		c, next := newAppCluster(t, n, false, forgesim.WithLatency(forgesim.Latency{REST: map[string]time.Duration{listRoute: list}}))
		startAppReplicas(t, c, next, 1, interval, 1, nil)
		defer c.stopAll()
		r := c.replicas[0]
		time.Sleep(list + time.Second)
		synctest.Wait()
		terms := shardTerms(c)
		if len(terms) == 0 || len(r.app.Installations()) != n || r.app.LastListed().Before(terms[0].At.Add(list)) {
			t.Fatalf("want the shard elected, then the %d installations listed %v later: terms %+v, listed at %v", n, list, terms, r.app.LastListed())
		}
		if got := c.sim.Requests(forgesim.Filter{Route: mintRoute}); got != n {
			t.Errorf("token mints %v after the election, the installations known since %v: %d, want %d: each minted ahead of its first pass, due from %v on",
				list+time.Second, list, got, n, interval/2)
		}
		for id := int64(1); id <= n; id++ {
			if p := sweptBy(c, id); len(p) != 0 {
				t.Errorf("installation %d swept at %v, want its first pass no sooner than half an interval after the election", id, p[0].At)
			}
		}
	})
}
