package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// mintRoute is the simulator's route of an installation token mint.
const mintRoute = "POST /app/installations/{id}/access_tokens"

// suspendWithWebhook suspends installation id on c's simulator and posts
// its suspend webhook to r, which applies it: GitHub says it is suspended.
func suspendWithWebhook(t *testing.T, c *cluster, r *replica, id int64) {
	t.Helper()
	if err := c.sim.SuspendInstallation(id); err != nil {
		t.Fatal(err)
	}
	if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("suspend", id)); code != http.StatusOK {
		t.Fatalf("installation suspend webhook: %d %s, want 200: GitHub says it is suspended", code, body)
	}
}

// seedSecondPull opens pull #2 of installation 1's repository at head
// sha-1-2, stores its run, and returns its pull_request event.
func seedSecondPull(t *testing.T, c *cluster) string {
	t.Helper()
	run := appRun(1)
	run.Pull, run.HeadSHA = 2, "sha-1-2"
	run.ID = gaterun.ID(run.Host, run.Repo, run.Pull, run.HeadSHA)
	if err := c.sim.SeedPull("org-1", "repo-1", run.Pull, run.HeadSHA, "open"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.runs.Put(context.Background(), run, time.Now()); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(`"number":1`, `"number":2`, `"sha":"sha-1"`, `"sha":"sha-1-2"`).Replace(pullEvent(1))
}

// sweeping starts a cluster of installations 1 and 2, the simulator
// configured by opts, with one replica sweeping every interval in a group
// of shards shards, and lets three and a half intervals pass: each
// installation has its token and its first passes. The caller stops the
// replica.
func sweeping(t *testing.T, interval time.Duration, shards int, opts ...forgesim.Option) (*cluster, *replica) {
	t.Helper()
	c, next := newAppCluster(t, 2, true, opts...)
	startAppReplicas(t, c, next, 1, interval, shards, nil)
	time.Sleep(3*interval + interval/2)
	synctest.Wait()
	return c, c.replicas[0]
}

// TestAppModeASuspendedInstallationIsNeitherSweptNorMinted pins App mode
// against a suspension on the simulator: GitHub refuses to mint a
// suspended installation's tokens (403) but still lists it, with its
// suspended_at set ("Suspend an app installation":
// https://docs.github.com/rest/apps/apps#suspend-an-app-installation).
// After the suspend webhook (checked with GitHub, then applied) the
// installation gets no pass and its sweeper asks for no token, also
// across the hourly re-list of the App's installations and past the
// expiry of the token it held, and a run reported for its repository is
// refused 422; after the unsuspend webhook it is swept again, with a token
// minted for it. The other installation is swept throughout.
func TestAppModeASuspendedInstallationIsNeitherSweptNorMinted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, r := sweeping(t, interval, shards)
		defer r.stop()
		if len(sweptBy(c, 1)) == 0 {
			t.Fatal("installation 1 not swept before its suspension")
		}

		suspendWithWebhook(t, c, r, 1)
		time.Sleep(interval)
		synctest.Wait()
		swept, others := len(sweptBy(c, 1)), len(sweptBy(c, 2))
		// Past the hourly re-list and the expiry of every token minted
		// before the suspension (an hour after its mint).
		time.Sleep(2*time.Hour + interval)
		synctest.Wait()
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}); n != 0 {
			t.Errorf("mints GitHub refused for the suspended installation: %d in two hours, want none: its sweeper must not ask for a token GitHub refuses", n)
		}
		if n := len(sweptBy(c, 1)) - swept; n != 0 {
			t.Errorf("installation 1 suspended: %d passes in the two hours after its webhook, want none", n)
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after a re-list while suspended, want it left out: GitHub lists it with suspended_at set")
		}
		if n := len(sweptBy(c, 2)) - others; n < 120 {
			t.Errorf("installation 2: %d passes in two hours, want one an interval: the others go on", n)
		}
		if code, body := r.call(t, "POST", "/api/runs", "", `{"repo":"org-1/repo-1","pull":2,"head_sha":"0123456789abcdef0123456789abcdef01234567","verdict":"success"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "suspended") {
			t.Errorf("POST /api/runs for the suspended installation's repository: %d %s, want 422 saying its installation is suspended", code, body)
		}

		if err := c.sim.UnsuspendInstallation(1); err != nil {
			t.Fatal(err)
		}
		minted := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated})
		if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("unsuspend", 1)); code != http.StatusOK {
			t.Fatalf("installation unsuspend webhook: %d %s, want 200", code, body)
		}
		swept = len(sweptBy(c, 1))
		time.Sleep(2 * interval)
		synctest.Wait()
		if n := len(sweptBy(c, 1)) - swept; n == 0 {
			t.Error("installation 1 unsuspended: no pass within 2 intervals, want it swept again")
		}
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated}) - minted; n == 0 {
			t.Error("installation 1 unsuspended: no token minted, want one: its old tokens expired meanwhile")
		}
	})
}

// TestAppModeASuspensionWhoseWebhookIsLostCostsOneRefusedMint pins App
// mode against a suspension whose webhook never came (GitHub does not
// redeliver a failed delivery on its own: "Handling failed webhook
// deliveries",
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries):
// the installation's sweeper learns of it from the first mint GitHub
// refuses, checks with GitHub that the installation is suspended
// (InstallationGone), and drops it, instead of asking for a refused token
// every pass until the hourly re-list. Tokens live a minute here, within
// the forge client's TokenMargin, so none is served past the request it
// was minted for and the suspension meets a mint, not a token minted
// before it (TestAppModeASuspensionMetWithAnOlderTokenCostsOneRefusedRequest).
func TestAppModeASuspensionWhoseWebhookIsLostCostsOneRefusedMint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, r := sweeping(t, interval, shards, forgesim.WithTokenTTL(forge.TokenMargin))
		defer r.stop()
		if err := c.sim.SuspendInstallation(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Minute) // short of the hourly re-list
		synctest.Wait()
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}); n != 1 {
			t.Errorf("mints GitHub refused for the suspended installation: %d in 50 minutes, want 1: the first refusal has its sweeper check and drop it", n)
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after a refused mint while suspended, want it dropped")
		}
		swept := len(sweptBy(c, 2))
		time.Sleep(5 * interval)
		synctest.Wait()
		if n := len(sweptBy(c, 2)) - swept; n < 5 {
			t.Errorf("installation 2: %d passes in 5 intervals, want one an interval: the others go on", n)
		}
	})
}

// TestAppModeRunsOfASuspendedInstallationAreNotCountedUncovered pins what
// merge_gate_runs_uncovered counts: runs whose repository no installation
// of the App covers, for which IterionRunsUncovered says to install the
// App there. A suspended installation still covers its repositories
// (GitHub answers its repository's installation look-up with it, its
// suspended_at set); their runs wait for its unsuspension and are not
// counted, whether the adopter's holder finds them (stored under the
// suspended installation, which the App does not know while suspended) or
// a sweeper does (stored under another installation, whose token cannot
// read their pull request); and the adopter looks a suspended
// installation's repository up again only after the App's installations
// changed, as it does one no installation covers.
func TestAppModeRunsOfASuspendedInstallationAreNotCountedUncovered(t *testing.T) {
	for _, c := range []struct {
		name  string
		under int64 // the installation org-1/repo-1's run is stored under
		why   string
	}{
		{"found by the adopter", 1, "the adopter finds the run under an installation the App does not know"},
		{"found by a sweeper", 2, "installation 2's sweeper cannot read the run's pull request and looks its repository up"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl, next := newAppCluster(t, 2, false)
				lookUps := &pathCounter{next: next}
				run := appRun(1)
				run.Installation = c.under
				if _, err := cl.runs.Put(context.Background(), run, time.Now()); err != nil {
					t.Fatal(err)
				}
				if err := cl.sim.SuspendInstallation(1); err != nil {
					t.Fatal(err)
				}
				startAppReplicas(t, cl, lookUps, 2, time.Minute, 4, nil)
				defer cl.stopAll()
				// The adopter's first pass comes 5 sweep intervals after
				// its election, its second 5 after that; a sweeper has
				// made ten passes by then.
				time.Sleep(10*time.Minute + time.Second)
				synctest.Wait()
				if got := uncoveredGauge(t, cl); got != 0 {
					t.Errorf("merge_gate_runs_uncovered summed over the replicas with installation 1 suspended: %v, want 0: its repository is covered, by a suspended installation (%s)", got, c.why)
				}
				if n := lookUps.count("/repos/org-1/repo-1/installation"); c.under == 1 && n != 1 {
					t.Errorf("look-ups of org-1/repo-1's installation in two adopter passes: %d, want 1: a suspended installation's repository waits for news", n)
				}
			})
		})
	}
}

// TestAppModeAnUnsuspendGitHubContradictsIsNotApplied pins the check of an
// installation event that would serve an installation again: its body is
// signed, but a body captured once can be sent again after the delivery
// window, long after GitHub suspended the installation anew. An
// unsuspend (or created) event for an installation GitHub says is
// suspended is answered 200 with "not_applied" and changes nothing: the
// installation stays out of the App client's set, so a run reported for
// its repository is still refused 422 saying it is suspended.
func TestAppModeAnUnsuspendGitHubContradictsIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, interval, shards, nil)
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(interval)
		synctest.Wait()
		suspendWithWebhook(t, c, r, 1)
		for _, action := range []string{"unsuspend", "created", "new_permissions_accepted"} {
			code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent(action, 1))
			if code != http.StatusOK || !strings.Contains(body, "not_applied") {
				t.Errorf("a replayed %s of installation 1, which GitHub says is suspended: %d %s, want 200 not_applied", action, code, body)
			}
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after a replayed unsuspend while GitHub says it is suspended, want it left out")
		}
		if code, body := r.call(t, "POST", "/api/runs", "", `{"repo":"org-1/repo-1","pull":2,"head_sha":"0123456789abcdef0123456789abcdef01234567","verdict":"success"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "suspended") {
			t.Errorf("POST /api/runs for the suspended installation's repository after a replayed unsuspend: %d %s, want 422 saying its installation is suspended", code, body)
		}
	})
}

// TestAppModeAMintRefusedWhileTheInstallationIsThereBacksOff pins the
// sweeper's answer to a mint GitHub refuses 403 for a reason other than
// suspension (the installation there, not suspended: the App's
// permissions, an IP allow list, a transient refusal): after each such
// refusal its installation's mints are held back, one interval after the
// first and twice as long after each next, up to the re-list period (an
// hour), so over two hours the refused mints, and the checks with GitHub
// that follow each, are about log2(120) rather than one an interval; each
// is counted in merge_gate_installation_mints_refused_total. A successful
// mint, or an installation webhook for it (on this replica, or on another
// that tells it through its news lease), ends the hold and its
// doubling: the next refusal is held back one interval again. The other
// installation is swept throughout. Tokens live 10 minutes here, so a
// token is asked for every few passes.
func TestAppModeAMintRefusedWhileTheInstallationIsThereBacksOff(t *testing.T) {
	const interval = time.Minute
	cases := []struct {
		name  string
		reset func(t *testing.T, c *cluster, r *replica)
		rule  string
	}{
		{"a successful mint", func(t *testing.T, c *cluster, r *replica) {
			if err := c.sim.RefuseMints(1, false); err != nil {
				t.Fatal(err)
			}
			minted := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated})
			time.Sleep(time.Hour + 2*interval) // past the longest hold
			synctest.Wait()
			if n := c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusCreated}) - minted; n == 0 {
				t.Fatal("no token minted in the hour after GitHub stopped refusing, want some: a hold ends")
			}
			if err := c.sim.RefuseMints(1, true); err != nil {
				t.Fatal(err)
			}
		}, "a successful mint ends the hold's doubling"},
		{"an installation webhook", func(t *testing.T, c *cluster, r *replica) {
			if code, body := r.call(t, "POST", "/webhooks/github", "installation", installationEvent("new_permissions_accepted", 1)); code != http.StatusOK || strings.Contains(body, "not_applied") {
				t.Fatalf("installation new_permissions_accepted webhook: %d %s, want 200 applied", code, body)
			}
		}, "an installation webhook for it ends the hold"},
		{"another replica's news of an installation webhook", func(t *testing.T, c *cluster, r *replica) {
			// What the replica a new_permissions_accepted reached tells.
			name := "app-installations-changed/1/installed/org-1/replica-elsewhere"
			if ok, err := c.leases.Acquire(context.Background(), name, "replica-elsewhere", time.Now(), 3*interval); !ok || err != nil {
				t.Fatalf("Acquire(%s) = %t, %v", name, ok, err)
			}
		}, "an installation webhook applied through another replica's news ends the hold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _ := refusingMints(t, interval, 1)
				r := c.replicas[0]
				defer r.stop()
				refused := func() int64 { return c.sim.Requests(forgesim.Filter{Route: mintRoute, Status: http.StatusForbidden}) }
				checks := func() int64 { return c.sim.Requests(forgesim.Filter{Route: getInstallationRoute}) }
				others := len(sweptBy(c, 2))
				const window = 2 * time.Hour
				time.Sleep(window)
				synctest.Wait()
				// Holds of 1, 2, 4, ..., 32 intervals, then of an hour: 8 refusals
				// at most in two hours, where one an interval is 120.
				if n := refused(); n < 3 || n > 8 {
					t.Errorf("mints GitHub refused in %v, the installation there: %d, want 3 to 8: a refusal holds the next mints back, the hold doubling up to the re-list period", window, n)
				}
				if n, m := checks(), refused(); n != m {
					t.Errorf("checks with GitHub: %d, want one a refused mint (%d)", n, m)
				}
				if got, want := metricValue(t, r.handler, "merge_gate_installation_mints_refused_total"), float64(refused()); got != want {
					t.Errorf("merge_gate_installation_mints_refused_total = %v, want %v: each refusal of an installation GitHub has is counted", got, want)
				}
				if _, err := r.app.Installation(1); err != nil {
					t.Errorf("installation 1 after refused mints: %v, want known: GitHub has it, not suspended", err)
				}
				if n := len(sweptBy(c, 2)) - others; n < 115 {
					t.Errorf("installation 2: %d passes in %v, want one an interval: the others go on", n, window)
				}

				tc.reset(t, c, r)
				before := refused()
				time.Sleep(15 * interval) // the token just minted expires within it
				synctest.Wait()
				if n := refused() - before; n < 2 {
					t.Errorf("mints refused in the 15 intervals after the reset: %d, want 2 or more: %s, so the next refusal is held back one interval, not an hour", n, tc.rule)
				}
			})
		})
	}
}

// TestAppModeASuspensionMetWithAnOlderTokenCostsOneRefusedRequest pins
// App mode against a suspension whose webhook never came, met by a
// sweeper still holding a token minted before it: GitHub blocks the
// installation's access to its account's resources ("Suspending a GitHub
// App installation":
// https://docs.github.com/apps/maintaining-github-apps/suspending-a-github-app-installation),
// and the simulator answers that token's requests 403 "This installation
// has been suspended". The first such answer is known for a suspension
// (forge.ErrSuspended), not a rate limit nor a failure to retry: the
// token is dropped, GitHub is asked once whether the installation is
// suspended (InstallationGone), and it leaves the sweep, as after a
// refused mint. So half an hour costs one refused request, one check and
// no mint; the other installation is swept every interval throughout.
func TestAppModeASuspensionMetWithAnOlderTokenCostsOneRefusedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, r := sweeping(t, interval, shards)
		defer r.stop()
		if requestsBy(c.sim, 1, "", http.StatusOK) == 0 {
			t.Fatal("installation 1 made no request with its token before the suspension (setup)")
		}
		checks := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute})
		others := len(sweptBy(c, 2))
		if err := c.sim.SuspendInstallation(1); err != nil { // no webhook is set: it is lost
			t.Fatal(err)
		}
		const window = 30 * time.Minute // the token held lives on through it
		time.Sleep(window)
		synctest.Wait()
		if n := requestsBy(c.sim, 1, "", http.StatusForbidden); n != 1 {
			t.Errorf("requests refused 403 with installation 1's token in %v: %d, want 1: the first refusal says it is suspended", window, n)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: mintRoute}); n != 2 {
			t.Errorf("token mints in all: %d, want 2, one per installation before the suspension: the refused token is dropped, not minted again", n)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute}) - checks; n != 1 {
			t.Errorf("checks with GitHub after the refusal: %d, want 1", n)
		}
		if _, err := r.app.Installation(1); err == nil {
			t.Error("installation 1 known after its token was refused for its suspension, want it dropped")
		}
		if s := r.app.Suspended(); len(s) != 1 || s[0].ID != 1 {
			t.Errorf("Suspended() = %+v, want installation 1: GitHub said so when asked", s)
		}
		if n := len(sweptBy(c, 2)) - others; n < int(window/interval)-1 {
			t.Errorf("installation 2: %d passes in %v, want one an interval: another installation's suspension holds nothing back", n, window)
		}
	})
}

// TestAppModeAWebhookOfferRefusedForASuspensionChecksTheInstallationOnce
// pins the webhook's offer against a suspension whose webhook was lost,
// met with a token minted before it: the read GitHub refuses for the
// suspension has the installation checked, as the sweeper's would (one
// request with the App's JWT), and dropped, so the next delivery for its
// repository asks for no token GitHub would refuse, nor does the
// sweeper's next pass.
func TestAppModeAWebhookOfferRefusedForASuspensionChecksTheInstallationOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, r := sweeping(t, interval, shards)
		defer r.stop()
		event := seedSecondPull(t, c)
		checks := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute})
		mints := c.sim.Requests(forgesim.Filter{Route: mintRoute})
		if err := c.sim.SuspendInstallation(1); err != nil { // no webhook is set: it is lost
			t.Fatal(err)
		}
		for delivery := 1; delivery <= 2; delivery++ {
			if code, body := r.call(t, "POST", "/webhooks/github", "pull_request", event); code >= 500 {
				t.Fatalf("pull_request delivery %d: %d %s, want it processed", delivery, code, body)
			}
			synctest.Wait()
		}
		time.Sleep(2 * interval) // the sweeper's next passes
		synctest.Wait()
		checkedOnce(t, c, r, checks, mints, "a webhook offer's read")
		if s := r.app.Suspended(); len(s) != 1 || s[0].ID != 1 {
			t.Errorf("Suspended() = %+v, want installation 1: GitHub said so when asked", s)
		}
	})
}

// TestAppModeABoardReadRefusedForASuspensionChecksTheInstallationOnce pins
// the board sync against a suspension whose webhook was lost, met with a
// token minted before it: the list GitHub refuses for the suspension has
// the installation checked, as the sweeper's read would (one request with
// the App's JWT), and dropped, so neither the pass's next repository of
// the installation nor a later pass or sweep asks for a token GitHub
// would refuse; the other installation's repository is synced
// throughout.
func TestAppModeABoardReadRefusedForASuspensionChecksTheInstallationOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 2, false)
		if err := c.sim.AddInstallationRepos(1, "org-1/repo-2"); err != nil {
			t.Fatal(err)
		}
		seedIssues(t, "org-1/repo-1#5", "org-1/repo-2#6", "org-2/repo-1#7")(c.sim)
		cards := board.NewMemoryStore()
		startAppReplicas(t, c, next, 1, interval, 2, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval = cards, []string{"org-1/repo-1", "org-1/repo-2", "org-2/repo-1"}, interval
		})
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		if requestsBy(c.sim, 1, issuesRoute, http.StatusOK) == 0 {
			t.Fatal("installation 1's repositories not listed with its token before the suspension (setup)")
		}
		checks := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute})
		mints := c.sim.Requests(forgesim.Filter{Route: mintRoute})
		others := requestsBy(c.sim, 2, issuesRoute, 0)
		if err := c.sim.SuspendInstallation(1); err != nil { // no webhook is set: it is lost
			t.Fatal(err)
		}
		time.Sleep(5 * interval)
		synctest.Wait()
		checkedOnce(t, c, r, checks, mints, "a board sync's list")
		if n := requestsBy(c.sim, 2, issuesRoute, 0) - others; n < 4 {
			t.Errorf("installation 2: %d issue lists in 5 intervals, want one an interval: another installation's suspension holds nothing back", n)
		}
	})
}

// checkedOnce asserts what what, refused for installation 1's suspension
// with a token minted before it, cost c since the simulator had counted
// checks checks and mints mints: one refused request, one check with
// GitHub (the sweeper's, reused), no mint after, and installation 1
// dropped from replica r's App client.
func checkedOnce(t *testing.T, c *cluster, r *replica, checks, mints int64, what string) {
	t.Helper()
	if n := requestsBy(c.sim, 1, "", http.StatusForbidden); n != 1 {
		t.Errorf("requests refused 403 with installation 1's tokens: %d, want 1: the first refusal, of %s, has the installation checked", n, what)
	}
	if n := c.sim.Requests(forgesim.Filter{Route: getInstallationRoute}) - checks; n != 1 {
		t.Errorf("checks with GitHub after %s was refused: %d, want 1: the sweeper's check, reused", what, n)
	}
	if n := c.sim.Requests(forgesim.Filter{Route: mintRoute}) - mints; n != 0 {
		t.Errorf("token mints after the suspension: %d, want none: the check after %s was refused dropped the installation", n, what)
	}
	if _, err := r.app.Installation(1); err == nil {
		t.Errorf("installation 1 known after %s was refused for its suspension, want it dropped", what)
	}
}
