package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// listRoute is the simulator's route of GET /app/installations.
const listRoute = "GET /app/installations"

// newsLeases is the names of the news leases in c's lease store.
func newsLeases(t *testing.T, c *cluster) []string {
	t.Helper()
	hs, err := c.leases.Holders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range hs {
		if strings.HasPrefix(h.Name, "app-installations-changed/") {
			out = append(out, h.Name+" ("+h.Owner+")")
		}
	}
	return out
}

// knows reports whether every replica of c knows installation id (want
// true) or none does (want false), naming the first that does not agree.
func knows(c *cluster, id int64, want bool) (string, bool) {
	for _, r := range c.replicas {
		_, err := r.app.Installation(id)
		if (err == nil) != want {
			return r.owner, false
		}
	}
	return "", true
}

// TestAppModeAnInstallationWebhookReachesEveryReplicaWithoutAList pins
// installation news: a webhook reaching one replica changes every
// replica's installations within an interval, an installation created and
// then deleted alike, with no request to GitHub (no list of the App's
// installations after the start-up ones, none at all from the replicas it
// did not reach); the replica it reached releases its news lease once
// the lease's TTL (3 intervals) has passed, so the store does not keep
// them.
func TestAppModeAnInstallationWebhookReachesEveryReplicaWithoutAList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 4
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 3, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(3 * interval)
		synctest.Wait()
		lists := c.sim.Requests(forgesim.Filter{Route: listRoute})
		if lists != 3 {
			t.Fatalf("lists of the App's installations at start-up: %d, want 3, one a replica", lists)
		}

		if err := c.sim.AddInstallation(3, "org-3", appRepo(3)); err != nil {
			t.Fatal(err)
		}
		to := c.replicas[0]
		if code, body := to.call(t, "POST", "/webhooks/github", "installation", installationEvent("created", 3)); code != http.StatusOK {
			t.Fatalf("installation created webhook: %d %s, want 200", code, body)
		}
		time.Sleep(interval)
		synctest.Wait()
		if who, ok := knows(c, 3, true); !ok {
			t.Fatalf("an interval after installation 3's created webhook reached %s, %s does not know it", to.owner, who)
		}
		if err := c.sim.RemoveInstallation(3); err != nil {
			t.Fatal(err)
		}
		if code, body := c.replicas[1].call(t, "POST", "/webhooks/github", "installation", installationEvent("deleted", 3)); code != http.StatusOK {
			t.Fatalf("installation deleted webhook: %d %s, want 200", code, body)
		}
		time.Sleep(interval)
		synctest.Wait()
		if who, ok := knows(c, 3, false); !ok {
			t.Fatalf("an interval after installation 3's deleted webhook, %s still knows it", who)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: listRoute}); n != lists {
			t.Errorf("lists of the App's installations after the webhooks: %d more, want none: the news says what changed", n-lists)
		}
		if n := len(newsLeases(t, c)); n != 2 {
			t.Errorf("news leases while fresh: %v, want 2 (created, deleted)", newsLeases(t, c))
		}
		time.Sleep(3 * interval)
		synctest.Wait()
		if left := newsLeases(t, c); len(left) != 0 {
			t.Errorf("news leases 3 intervals after: %v, want none: each is released once its TTL passed", left)
		}
	})
}

// TestAppModeADeadReplicasNewsIsReadThenCleared pins the news of a
// replica that died before releasing it: the others apply it while it is
// fresh, and clear it (take it, then release it) once it has been expired
// a TTL more, without applying it again.
func TestAppModeADeadReplicasNewsIsReadThenCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 1, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(2 * interval)
		synctest.Wait()
		// The dead replica told the others of installation 1's removal.
		name := "app-installations-changed/1/gone/org-1/ghost"
		if ok, err := c.leases.Acquire(context.Background(), name, "ghost", time.Now(), 3*interval); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %t, %v", name, ok, err)
		}
		time.Sleep(interval)
		synctest.Wait()
		if who, ok := knows(c, 1, false); !ok {
			t.Fatalf("an interval after the dead replica's news, %s still knows installation 1", who)
		}
		// GitHub still has installation 1: the adopter's look-up of its
		// run finds it again, and its replica tells that as news of its
		// own, which is not the dead replica's.
		ghost := func() bool {
			return slices.ContainsFunc(newsLeases(t, c), func(l string) bool { return strings.HasPrefix(l, name+" ") })
		}
		time.Sleep(4 * interval) // expired at 3: kept for a replica that lists late
		synctest.Wait()
		if !ghost() {
			t.Errorf("the dead replica's news 5 intervals after: gone from %v, want it kept until 3 intervals past its expiry", newsLeases(t, c))
		}
		time.Sleep(3 * interval) // cleared after 6
		synctest.Wait()
		if ghost() {
			t.Errorf("the dead replica's news 8 intervals after: still in %v, want cleared", newsLeases(t, c))
		}
	})
}

// TestAppModeReplicasListTheInstallationsOneAtATime pins the list lease:
// replicas starting together, whose lists each take GitHub's time (the
// latency model on), list the App's installations one after another,
// never two at once, and each lists once, a replica waiting for the lease
// trying again every tenth of an interval or so, so all four have listed
// within the first interval; and the lease is left free.
func TestAppModeReplicasListTheInstallationsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 4
		c, next := newAppCluster(t, 4, true, forgesim.WithLatency(forgesim.GitHubLatency()))
		lists := &forgetest.InFlight{Next: next, Match: func(req *http.Request) bool {
			return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/app/installations")
		}}
		start := time.Now()
		startAppReplicas(t, c, lists, 4, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(3 * interval)
		synctest.Wait()
		began := lists.Began()
		most, of := lists.Most(), len(began)
		if of != 4 || most != 1 {
			t.Errorf("lists of the App's installations: %d, at most %d at once; want 4, one at a time", of, most)
		}
		if of > 0 && began[of-1].Sub(start) >= interval {
			t.Errorf("the last of the start-up lists began %v after the start, want within the interval: a replica waiting for the list lease tries again every tenth of an interval or so", began[of-1].Sub(start))
		}
		hs, err := c.leases.Holders(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.Name == "app-installations-list" {
				t.Errorf("the list lease is held by %s after the lists: want it released", h.Owner)
			}
		}
	})
}

// TestAppModeASuspensionIsToldToEveryReplica pins that the replica that
// learns of a suspension tells the others, whichever way it learns: a
// suspend webhook (here delivered to a replica not sweeping the
// installation), or, the webhook lost, GitHub refusing its sweeper a read
// made with a token minted before the suspension, and the check that
// follows. Within a few intervals every replica has dropped the
// installation and lists it suspended, from the news lease and without a
// request of its own: the suspension costs the deployment no refused mint
// and at most one refused read, and a run reported to any replica for
// its repository is refused 422 saying it is suspended. Every replica's
// installations view shows it suspended since GitHub's suspended_at,
// which the "suspended" news lease's name carries, not only the replica
// that learnt it. The news is told with a "gone" lease beside the
// "suspended" one, which a replica of the release before, knowing no
// "suspended" kind, reads alone and drops the installation on.
func TestAppModeASuspensionIsToldToEveryReplica(t *testing.T) {
	const interval, shards = time.Minute, 2
	for _, tc := range []struct {
		name    string
		suspend func(t *testing.T, c *cluster)
		refused int64 // the most reads GitHub refuses the deployment
	}{
		// The sweeping replica hears the news at its next tick, and may
		// have a pass before it.
		{"by a suspend webhook", func(t *testing.T, c *cluster) {
			suspendWithWebhook(t, c, notSweeping(t, c, shards, 1), 1)
		}, 1},
		{"by a read refused, the webhook lost", func(t *testing.T, c *cluster) {
			if err := c.sim.SuspendInstallation(1); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, next := newAppCluster(t, 2, true)
				startAppReplicas(t, c, next, 2, interval, shards, nil)
				defer c.stopAll()
				time.Sleep(3*interval + interval/2)
				synctest.Wait()
				other := notSweeping(t, c, shards, 1)
				suspendedAt := time.Now().UTC().Truncate(time.Second) // GitHub's suspended_at, to the second
				tc.suspend(t, c)
				seen := map[string]bool{}
				for range 4 {
					time.Sleep(interval)
					synctest.Wait()
					for _, name := range newsLeases(t, c) {
						kind := strings.Split(strings.TrimPrefix(name, "app-installations-changed/"), "/")
						if len(kind) > 1 && kind[0] == "1" {
							k, _, _ := strings.Cut(kind[1], "@") // suspended@<suspended_at>
							seen[k] = true
						}
					}
				}
				for _, r := range c.replicas {
					if _, err := r.app.Installation(1); err == nil {
						t.Errorf("%s still knows installation 1 four intervals after its suspension was learnt, want it dropped: the news says so", r.owner)
					}
					if s := r.app.Suspended(); len(s) != 1 || s[0].ID != 1 {
						t.Errorf("%s: Suspended() = %+v, want installation 1: the news says it is suspended, not only gone", r.owner, s)
					}
					if v, ok := installationView(t, r, 1); !ok || v.SuspendedAt == nil || !v.SuspendedAt.Equal(suspendedAt) {
						t.Errorf("%s: GET /api/installations shows installation 1 (listed %t) suspended since %s, want %s: every replica shows GitHub's suspended_at, which the news carries", r.owner, ok, timeOrNull(v.SuspendedAt), suspendedAt.Format(time.RFC3339))
					}
				}
				if !seen["gone"] || !seen["suspended"] {
					t.Errorf("news lease kinds told for installation 1: %v, want gone and suspended: a replica of the release before reads gone alone", seen)
				}
				if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}); n != 0 {
					t.Errorf("mints GitHub refused the deployment: %d, want none", n)
				}
				if n := requestsBy(c.sim, 1, "", http.StatusForbidden); n > tc.refused {
					t.Errorf("reads GitHub refused installation 1's tokens: %d, want %d at most: only the sweeping replica's, before it learnt", n, tc.refused)
				}
				if code, body := other.call(t, "POST", "/api/runs", "", `{"repo":"org-1/repo-1","pull":2,"head_sha":"0123456789abcdef0123456789abcdef01234567","verdict":"success"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "suspended") {
					t.Errorf("POST /api/runs to %s, which does not sweep installation 1, for its repository: %d %s, want 422 saying its installation is suspended", other.owner, code, body)
				}
			})
		})
	}
}

// TestAppModeADeletionToldToEveryReplicaEndsItsSuspendedListing pins the
// news of a deletion against the suspended listing: an installation
// suspended, then deleted, by webhooks to one replica is listed suspended
// by every replica's installations view once the suspension's news
// reached it, and by none once the deletion's did, within a couple of
// intervals, not at the next hourly re-list.
func TestAppModeADeletionToldToEveryReplicaEndsItsSuspendedListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		told := c.replicas[0]
		suspendWithWebhook(t, c, told, 1)
		listed := func(r *replica) bool {
			v, ok := installationView(t, r, 1)
			return ok && v.Suspended
		}
		for _, step := range []struct {
			rule   string
			change func()
			want   bool
		}{
			{"the suspension's news lists it suspended", func() {}, true},
			{"the deletion's news ends the listing", func() {
				if err := c.sim.RemoveInstallation(1); err != nil {
					t.Fatal(err)
				}
				if code, body := told.call(t, "POST", "/webhooks/github", "installation", installationEvent("deleted", 1)); code != http.StatusOK {
					t.Fatalf("installation deleted webhook: %d %s, want 200: GitHub says it is gone", code, body)
				}
			}, false},
		} {
			step.change()
			time.Sleep(2 * interval)
			synctest.Wait()
			for _, r := range c.replicas {
				if got := listed(r); got != step.want {
					t.Errorf("%s lists installation 1 suspended: %v, want %v: %s on every replica", r.owner, got, step.want, step.rule)
				}
			}
		}
	})
}

// timeOrNull is t in RFC 3339, or null for nil, as the JSON says it.
func timeOrNull(t *time.Time) string {
	if t == nil {
		return "null"
	}
	return t.Format(time.RFC3339Nano)
}

// reversedHolders is a lease store that lists its leases in the reverse of
// the memory store's order: a store promises no order.
type reversedHolders struct{ *lease.MemoryStore }

func (s reversedHolders) Holders(ctx context.Context) ([]lease.Holder, error) {
	hs, err := s.MemoryStore.Holders(ctx)
	slices.Reverse(hs)
	return hs, err
}

// TestAppModeASuspensionsNewsIsAppliedGoneFirst pins the order a replica
// applies a suspension's two news leases in, gone and suspended, taken at
// the same instant: gone first, whatever order its lease store lists them
// in, since a gone applied after the suspended would end the listing the
// suspended one made (forge.AppClient.Apply).
func TestAppModeASuspensionsNewsIsAppliedGoneFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 2, interval, shards, func(cfg *server.Config) {
			cfg.Leases = reversedHolders{c.leases}
		})
		defer c.stopAll()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		suspendWithWebhook(t, c, c.replicas[0], 1)
		time.Sleep(2 * interval)
		synctest.Wait()
		for _, r := range c.replicas {
			if s := r.app.Suspended(); len(s) != 1 || s[0].ID != 1 {
				t.Errorf("%s: Suspended() = %+v, want installation 1: the news of a suspension lists it suspended, its gone lease applied first", r.owner, s)
			}
		}
	})
}

// TestAnInstallationsNewsIsToldWholeWhenItsCallerIsDone pins the telling
// of a change against its caller's context: the sweeper's pass whose
// refused read found the installation suspended is stopped by that very
// drop, so the news is told on a context of its own (each lease still
// within StoreTimeout). A suspension told by its gone lease alone would
// have every other replica drop the installation without listing it
// suspended.
func TestAnInstallationsNewsIsToldWholeWhenItsCallerIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 1, false)
		startAppReplicas(t, c, next, 1, time.Minute, 1, nil)
		defer c.stopAll()
		done, cancel := context.WithCancel(context.Background())
		cancel()
		server.TellInstallationChange(c.replicas[0].srv, done, forge.InstallationChange{ID: 1, Gone: true, Suspended: true, Account: "org-1"})
		var kinds []string
		for _, name := range newsLeases(t, c) {
			kinds = append(kinds, strings.Split(strings.TrimPrefix(name, "app-installations-changed/"), "/")[1])
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, []string{"gone", "suspended"}) {
			t.Errorf("news leases told for a suspension by a caller whose context is done: %v, want [gone suspended]", kinds)
		}
	})
}

// TestAppModeNewsBeingClearedIsNotNews pins otherNews's rule for a news
// lease whose holder is not the replica its name says: another replica
// is clearing a dead one's long-expired news (taken, then released), and
// a replica that lists it meanwhile does not apply it, so a change long
// since overtaken is not applied again.
func TestAppModeNewsBeingClearedIsNotNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 1, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(2 * interval)
		synctest.Wait()
		name := "app-installations-changed/1/gone/org-1/ghost"
		if ok, err := c.leases.Acquire(context.Background(), name, "replica-clearing", time.Now(), 3*interval); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %t, %v", name, ok, err)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		if who, ok := knows(c, 1, true); !ok {
			t.Errorf("%s dropped installation 1 on news another replica holds to clear, want it kept: only the teller's own lease is news", who)
		}
	})
}

// TestAppModeANewsNameOfNoKnownShapeIsNotNews pins parseNews's reading:
// a suspended_at (@) belongs to a suspension only, so a lease named
// "gone@<time>" (another version's, or no replica's) is passed over, not
// read as a deletion; the replicas keep the installation.
func TestAppModeANewsNameOfNoKnownShapeIsNotNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 1, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(2 * interval)
		synctest.Wait()
		name := "app-installations-changed/1/gone@2000-01-01T00:00:00Z/org-1/ghost"
		if ok, err := c.leases.Acquire(context.Background(), name, "ghost", time.Now(), 3*interval); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %t, %v", name, ok, err)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		if who, ok := knows(c, 1, true); !ok {
			t.Errorf("%s dropped installation 1 on a lease named %s, want it kept: only a suspension carries a time", who, name)
		}
	})
}

// TestAppModeAReplicaReleasesItsNewsAtShutdown pins "released once its TTL
// has passed, or at shutdown": a replica stopped within its news lease's
// TTL releases it, leaving the store nothing for another to clear.
func TestAppModeAReplicaReleasesItsNewsAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		r := c.replicas[0]
		time.Sleep(2 * interval)
		synctest.Wait()
		if err := c.sim.RemoveInstallation(2); err != nil {
			t.Fatal(err)
		}
		if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("deleted", 2)); code != http.StatusOK {
			t.Fatalf("installation deleted webhook: %d %s, want 200", code, body)
		}
		if told := newsLeases(t, c); len(told) != 1 {
			t.Fatalf("news leases after the webhook: %v, want the one telling the deletion", told)
		}
		r.stop()
		synctest.Wait()
		if left := newsLeases(t, c); len(left) != 0 {
			t.Errorf("news leases after the replica stopped within their TTL: %v, want released", left)
		}
	})
}

// listLeaseDown is a lease store that does not answer for the list lease,
// app-installations-list, and answers for every other.
type listLeaseDown struct{ *lease.MemoryStore }

func (s listLeaseDown) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if name == "app-installations-list" {
		return false, errors.New("lease store: no answer")
	}
	return s.MemoryStore.Acquire(ctx, name, owner, now, ttl)
}

// TestAppModeAListIsNotHeldUpByALeaseStoreThatDoesNotAnswer pins the list
// lease's limit: it spreads the replicas' lists for GitHub's sake, and a
// store that does not answer for it does not hold a list up: the replica
// lists without it, at start-up and at a look-up.
func TestAppModeAListIsNotHeldUpByALeaseStoreThatDoesNotAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, interval, 2, func(cfg *server.Config) {
			cfg.Leases = listLeaseDown{c.leases}
		})
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(interval / 2)
		synctest.Wait()
		if n := len(r.app.Installations()); n != 2 {
			t.Fatalf("installations known with the list lease unanswered: %d, want 2: the start-up list is made without it", n)
		}
		if err := c.sim.AddInstallation(9, "org-9", appRepo(9)); err != nil {
			t.Fatal(err)
		}
		if code, body := r.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(9)); code != http.StatusAccepted {
			t.Fatalf("pull_request webhook of unknown installation 9: %d %s, want 202", code, body)
		}
		synctest.Wait()
		if _, err := r.app.Installation(9); err != nil {
			t.Errorf("installation 9 after its webhook, the list lease unanswered: %v, want it looked up at once", err)
		}
	})
}

// TestAppModeLookUpsListAtMostOnceAnInterval pins runApp's bound on
// look-ups: a webhook naming an installation the replica does not know
// has the App's installations listed at once, but those after it within
// the interval wait for its next tick, and are one list there, however
// many: webhooks naming installations GitHub does not have cost a list
// an interval, not one each.
func TestAppModeLookUpsListAtMostOnceAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 1, true)
		startAppReplicas(t, c, next, 1, interval, 2, nil)
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the start-up list
		lists := func() int64 { return c.sim.Requests(forgesim.Filter{Route: listRoute}) }
		before := lists()
		for id := int64(20); id < 25; id++ {
			if code, body := r.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(id)); code != http.StatusAccepted {
				t.Fatalf("pull_request webhook of unknown installation %d: %d %s, want 202", id, code, body)
			}
			synctest.Wait()
		}
		if n := lists() - before; n != 1 {
			t.Errorf("lists after 5 webhooks of unknown installations within an interval: %d, want 1, at once", n)
		}
		time.Sleep(interval)
		synctest.Wait()
		if n := lists() - before; n != 2 {
			t.Errorf("lists by the next tick: %d, want 2: the look-ups asked for since are one list there", n)
		}
	})
}

// newsDown is a lease store that does not answer for news leases
// (app-installations-changed/...): each Acquire of one waits for its
// context to end. It answers for every other lease.
type newsDown struct{ *lease.MemoryStore }

func (s newsDown) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	if strings.HasPrefix(name, "app-installations-changed/") {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return s.MemoryStore.Acquire(ctx, name, owner, now, ttl)
}

// TestAppModeFoundInstallationsUntoldHoldTheTickOneStoreTimeout pins the
// bound on telling the installations a replica found (AppClient.TakeFound)
// when the lease store does not answer for news: the first lease it does
// not answer ends the telling at that tick, so runApp's loop is held one
// StoreTimeout, not one per installation found, and a look-up a webhook
// asks for meanwhile (an installation the replica does not know) is made
// within a StoreTimeout of the tick, not after twenty.
func TestAppModeFoundInstallationsUntoldHoldTheTickOneStoreTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, found = time.Minute, 20
		c, next := newAppCluster(t, 1, false)
		startAppReplicas(t, c, next, 1, interval, 2, func(cfg *server.Config) {
			cfg.Leases = newsDown{c.leases}
		})
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(interval / 2)
		synctest.Wait()
		ctx := context.Background()
		for id := int64(10); id < 10+found; id++ {
			if err := c.sim.AddInstallation(id, fmt.Sprintf("org-%d", id), appRepo(id)); err != nil {
				t.Fatal(err)
			}
			owner, name, _ := strings.Cut(appRepo(id), "/")
			if _, _, err := r.app.ForRepo(ctx, owner, name); err != nil {
				t.Fatalf("ForRepo(%s): %v", appRepo(id), err)
			}
		}
		time.Sleep(interval/2 + time.Second) // a second into the tick's telling
		synctest.Wait()
		if err := c.sim.AddInstallation(99, "org-99", appRepo(99)); err != nil {
			t.Fatal(err)
		}
		if code, body := r.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(99)); code != http.StatusAccepted {
			t.Fatalf("pull_request webhook of unknown installation 99: %d %s, want 202", code, body)
		}
		time.Sleep(server.DefaultStoreTimeout)
		synctest.Wait()
		if _, err := r.app.Installation(99); err != nil {
			t.Errorf("installation 99 a StoreTimeout after its webhook, %d found installations being told to a store that does not answer: %v, want it looked up: the telling holds the tick one StoreTimeout", found, err)
		}
	})
}

// TestAppModeAFoundInstallationTheNewsSaysIsGoneIsNotToldInstalled pins
// the order of runApp's tick: the other replicas' news is applied before
// the installations this replica found are told (tellFound), so one it
// found by a repository's look-up, then deleted on GitHub with the
// webhook reaching another replica, is dropped by that news and not told
// installed after it, which would have the others know it again.
func TestAppModeAFoundInstallationTheNewsSaysIsGoneIsNotToldInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 1, false)
		startAppReplicas(t, c, next, 2, interval, 2, nil)
		defer c.stopAll()
		a, b := c.replicas[0], c.replicas[1]
		time.Sleep(2*interval + interval/2)
		synctest.Wait()
		if err := c.sim.AddInstallation(3, "org-3", appRepo(3)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.app.ForRepo(context.Background(), "org-3", "repo-1"); err != nil {
			t.Fatalf("%s: ForRepo(%s): %v", a.owner, appRepo(3), err)
		}
		if err := c.sim.RemoveInstallation(3); err != nil {
			t.Fatal(err)
		}
		if code, body := b.call(t, "POST", "/webhooks/github", "installation", installationEvent("deleted", 3)); code != http.StatusOK {
			t.Fatalf("installation deleted webhook to %s: %d %s, want 200", b.owner, code, body)
		}
		time.Sleep(interval/2 + time.Second) // past both replicas' next tick
		synctest.Wait()
		for _, l := range newsLeases(t, c) {
			if strings.HasPrefix(l, "app-installations-changed/3/installed/") {
				t.Errorf("news lease %s after %s's news of installation 3's deletion reached %s's tick, want none: it no longer knows it", l, b.owner, a.owner)
			}
		}
		if who, ok := knows(c, 3, false); !ok {
			t.Errorf("%s knows installation 3 after its deletion was told, want none", who)
		}
	})
}
