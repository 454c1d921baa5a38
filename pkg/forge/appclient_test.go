package forge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v88/github"
	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

const (
	listRoute     = "GET /app/installations"
	repoInstRoute = "GET /repos/{owner}/{repo}/installation"
	pullRoute     = "GET /repos/{owner}/{repo}/pulls/{number}"
)

// newApp makes an AppClient of App 42 on the simulator at srv with cfg's
// other fields.
func newApp(t *testing.T, srv *httptest.Server, cfg forge.AppConfig) *forge.AppClient {
	t.Helper()
	cfg.BaseURL, cfg.AppID, cfg.PrivateKey = srv.URL+"/", 42, forgetest.AppKey(t)
	if cfg.Next == nil {
		cfg.Next = srv.Client().Transport
	}
	a, err := forge.NewApp(cfg)
	if err != nil {
		t.Fatalf("forge.NewApp: %v", err)
	}
	return a
}

// appCount sums an AppClient's counts matching lane ("" any), code (-1
// any) and installation (-1 any).
func appCount(a *forge.AppClient, lane string, code int, installation int64) int64 {
	var n int64
	for _, k := range a.Counts() {
		if (lane == "" || k.Lane == lane) && (code == -1 || k.Code == code) && (installation == -1 || k.Installation == installation) {
			n += k.N
		}
	}
	return n
}

func TestAppClientListsEveryInstallationAcrossPagesOnLaneApp(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(250, 0))
	a := newApp(t, srv, forge.AppConfig{})
	if err := a.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := a.Installations()
	if len(got) != 250 || got[0] != (forge.Installation{ID: 1, Account: "org-1"}) || got[249].ID != 250 {
		t.Fatalf("Installations() = %d, first %+v; want 250 from 1 on org-1: every page of the list", len(got), got[0])
	}
	if n := sim.Requests(forgesim.Filter{Token: "app:42", Route: listRoute}); n != 3 {
		t.Fatalf("list requests the simulator got with the App's JWT: %d, want 3 (pages of 100)", n)
	}
	if n := appCount(a, forge.LaneApp, http.StatusOK, 0); n != 3 {
		t.Fatalf("list requests counted on lane app, installation 0: %d, want 3", n)
	}
	mustSim(t, sim.RemoveInstallation(250))
	if err := a.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Installation(250); !errors.Is(err, forge.ErrNotInstalled) {
		t.Fatalf("Installation(250) after it left the list: %v, want ErrNotInstalled: a re-list drops what GitHub no longer lists", err)
	}
}

func TestEachInstallationHasItsOwnTokenETagsAndBudgetGate(t *testing.T) {
	sim, srv := startSim(t, forgesim.WithBudget(3))
	mustSim(t, sim.SeedInstallations(2, 1))
	mustSim(t, sim.SeedPull("org-1", "repo-1", 1, "a", "open"))
	mustSim(t, sim.SeedPull("org-2", "repo-1", 1, "b", "open"))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	one, err := a.Installation(1)
	mustSim(t, err)
	two, err := a.Installation(2)
	mustSim(t, err)
	if again, _ := a.Installation(1); again != one {
		t.Fatal("Installation(1) twice gave two Clients: one Client per installation, so its budget figures cover all its callers")
	}
	ctx := laneCtx(forge.LaneMergeGateSweeper)
	for range 3 {
		if _, err := one.GetPull(ctx, "org-1", "repo-1", 1); err != nil {
			t.Fatal(err)
		}
	}
	// Installation 1's budget of 3: the first read charged 1, the ETag
	// made the next two free 304s; spend the rest with new answers.
	if n := countOf(one, forge.LaneMergeGateSweeper, http.StatusNotModified); n != 2 {
		t.Fatalf("304s of installation 1: %d, want 2: GETs are conditional on the installation token's ETag", n)
	}
	mustSim(t, sim.PushHead("org-1", "repo-1", 1, "a2"))
	mustSim(t, sim.SeedIssue("org-1", "repo-1", forgesim.Issue{Number: 2, Title: "x", State: "open"}))
	for _, step := range []func() error{
		func() error { _, err := one.GetPull(ctx, "org-1", "repo-1", 1); return err },
		func() error { _, err := one.ListIssues(ctx, "org-1", "repo-1", time.Time{}); return err },
	} {
		mustSim(t, step())
	}
	_, err = one.GetPull(ctx, "org-1", "repo-1", 1)
	var rl *forge.RateLimitError
	if !errors.As(err, &rl) || rl.Sent {
		t.Fatalf("installation 1 with its budget spent: %v, want a *RateLimitError held back by its gate", err)
	}
	if _, err := two.GetPull(ctx, "org-2", "repo-1", 1); err != nil {
		t.Fatalf("installation 2 while installation 1's budget is spent: %v, want its read: one installation's budget never holds another back", err)
	}
	// The simulator names a token it minted for installation N
	// ghs_sim_N_<serial>.
	readers := map[string]bool{}
	for _, rc := range sim.Stats().Requests {
		if rc.Route == pullRoute {
			parts := strings.Split(rc.Token, "_")
			if len(parts) != 4 {
				t.Fatalf("a read made with token %q, not an installation token", rc.Token)
			}
			readers[parts[2]] = true
		}
	}
	if len(readers) != 2 || !readers["1"] || !readers["2"] {
		t.Fatalf("installations whose tokens read pulls: %v, want 1 and 2: each installation's Client uses its own token", readers)
	}
	if n := countOf(two, "", -1); n != 2 {
		t.Fatalf("installation 2's Client counts %d requests, want 2 (its token and its read): a Client counts its installation's only", n)
	}
	if n := appCount(a, forge.LaneAuth, http.StatusCreated, 1); n != 1 {
		t.Fatalf("token mints counted for installation 1 on lane auth: %d, want 1", n)
	}
}

func TestForRepoResolvesOnceWithoutCaseAndNamesAnUncoveredRepository(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(3, 2))
	a := newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	for _, name := range [][2]string{{"ORG-2", "Repo-1"}, {"org-2", "repo-1"}} {
		c, id, err := a.ForRepo(ctx, name[0], name[1])
		if err != nil || id != 2 || c == nil {
			t.Fatalf("ForRepo(%s/%s) = %d, %v; want installation 2", name[0], name[1], id, err)
		}
	}
	if n := sim.Requests(forgesim.Filter{Route: repoInstRoute}); n != 1 {
		t.Fatalf("repository-installation requests: %d, want 1: the answer is cached, names compared without case", n)
	}
	_, _, err := a.ForRepo(ctx, "org-2", "repo-9")
	if !errors.Is(err, forge.ErrNotInstalled) || !strings.Contains(err.Error(), "org-2/repo-9") {
		t.Fatalf("ForRepo of an uncovered repository: %v, want ErrNotInstalled naming org-2/repo-9", err)
	}
	if n := appCount(a, forge.LaneApp, -1, 0); n != 2 {
		t.Fatalf("requests on lane app: %d, want 2 (one found, one 404)", n)
	}
}

// TestRecheckAsksAgainOnlyForTheInstallationThatCouldNotRead pins
// AppClient.Recheck: org-1/repo-1, cached as installation 1's, moved to
// installation 2 with no webhook telling the client. ForRepo keeps
// answering 1 from the cache; Recheck naming another installation as the
// one that could not read it trusts the cache (no request); Recheck naming
// 1 asks GitHub again (one request) and answers 2, which ForRepo then
// answers from the cache.
func TestRecheckAsksAgainOnlyForTheInstallationThatCouldNotRead(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(2, 1))
	a := newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	if _, id, err := a.ForRepo(ctx, "org-1", "repo-1"); err != nil || id != 1 {
		t.Fatalf("ForRepo(org-1/repo-1) = %d, %v; want 1", id, err)
	}
	mustSim(t, sim.AddInstallationRepos(2, "org-1/repo-1"))
	steps := []struct {
		call     func() (int64, error)
		want     int64
		requests int64
		rule     string
	}{
		{func() (int64, error) { _, id, err := a.ForRepo(ctx, "org-1", "repo-1"); return id, err }, 1, 1, "ForRepo answers from its cache"},
		{func() (int64, error) { _, id, err := a.Recheck(ctx, "org-1", "repo-1", 7); return id, err }, 1, 1, "a Recheck naming another installation trusts the cache"},
		{func() (int64, error) { _, id, err := a.Recheck(ctx, "ORG-1", "Repo-1", 1); return id, err }, 2, 2, "a Recheck naming the cached installation asks GitHub again, names compared without case"},
		{func() (int64, error) { _, id, err := a.ForRepo(ctx, "org-1", "repo-1"); return id, err }, 2, 2, "ForRepo then answers the new installation from the cache"},
	}
	for _, st := range steps {
		id, err := st.call()
		n := sim.Requests(forgesim.Filter{Route: repoInstRoute})
		if err != nil || id != st.want || n != st.requests {
			t.Fatalf("%s: installation %d (%v) after %d repository-installation requests; want %d after %d", st.rule, id, err, n, st.want, st.requests)
		}
	}
}

// relayWebhooks is the simulator's webhook option for two replicas' App
// clients, *a and *b (set once the simulator is up): each installation
// webhook is handled by *a, and the change it returns applied by *b, as
// another replica's news would be.
func relayWebhooks(t *testing.T, a, b **forge.AppClient) forgesim.Option {
	t.Helper()
	const secret = "s3cret"
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := github.ValidatePayload(r, []byte(secret))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := github.ParseWebHook(github.WebHookType(r), payload)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch ev := ev.(type) {
		case *github.InstallationEvent:
			(*b).Apply((*a).HandleInstallationEvent(ev))
		case *github.InstallationRepositoriesEvent:
			(*b).Apply((*a).HandleInstallationRepositoriesEvent(ev))
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(hooks.Close)
	return forgesim.WithWebhook(forgesim.Webhook{URL: hooks.URL, Secret: secret, AppID: 42})
}

// TestInstallationWebhooksKeepTheSetCurrentWithoutARequest pins that the
// installation webhooks keep the set current with no request, and that
// another replica's AppClient (b), told each change the webhooks made
// (Apply), knows the same set, with no request either, and asks GitHub
// again for a repository whose installation's repositories changed.
func TestInstallationWebhooksKeepTheSetCurrentWithoutARequest(t *testing.T) {
	var a, b *forge.AppClient
	sim, srv := startSim(t, relayWebhooks(t, &a, &b))
	a, b = newApp(t, srv, forge.AppConfig{}), newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	mustSim(t, sim.AddInstallation(9, "acme", "acme/app"))
	mustSim(t, sim.AddInstallationRepos(9, "acme/web"))
	for _, c := range []*forge.AppClient{a, b} {
		if got := c.Installations(); len(got) != 1 || got[0] != (forge.Installation{ID: 9, Account: "acme"}) {
			t.Fatalf("after the created webhook: %+v, want installation 9 on acme, told or applied", got)
		}
	}
	for _, repo := range []string{"app", "web"} {
		if _, id, err := a.ForRepo(ctx, "acme", repo); err != nil || id != 9 {
			t.Fatalf("ForRepo(acme/%s) = %d, %v; want 9", repo, id, err)
		}
	}
	if n := sim.Requests(forgesim.Filter{Token: "app:42"}); n != 0 {
		t.Fatalf("the App sent %d requests, want 0: the webhooks told it everything", n)
	}
	// b resolves acme/web itself (one request), then is told its
	// installation's repositories changed: it asks GitHub again.
	if _, id, err := b.ForRepo(ctx, "acme", "web"); err != nil || id != 9 {
		t.Fatalf("b: ForRepo(acme/web) = %d, %v; want 9", id, err)
	}
	mustSim(t, sim.RemoveInstallationRepos(9, "acme/web"))
	for _, c := range []*forge.AppClient{a, b} {
		if _, _, err := c.ForRepo(ctx, "acme", "web"); !errors.Is(err, forge.ErrNotInstalled) {
			t.Fatalf("ForRepo of a repository removed from the installation: %v, want ErrNotInstalled", err)
		}
	}
	if n := sim.Requests(forgesim.Filter{Route: repoInstRoute}); n != 3 {
		t.Fatalf("repository-installation requests: %d, want 3: b's first, then a's and b's again, each having forgotten acme/web", n)
	}
	mustSim(t, sim.RemoveInstallation(9))
	for _, c := range []*forge.AppClient{a, b} {
		if got := c.Installations(); len(got) != 0 {
			t.Fatalf("after the deleted webhook: %+v, want none, told or applied", got)
		}
	}
	if sent, failed := sim.Deliveries(); sent != 4 || failed != 0 {
		t.Fatalf("webhooks: %d sent, %d failed; want 4 handled", sent, failed)
	}
}

// TestRunRelistsEveryPeriodInVirtualTime pins Run's period: a list at
// once, then one every RelistEvery, an hour when it is unset; an
// installation no webhook told of is known from the next list on.
func TestRunRelistsEveryPeriodInVirtualTime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured time.Duration // AppConfig.RelistEvery
		period     time.Duration
	}{
		{"configured", 30 * time.Minute, 30 * time.Minute},
		{"unset: hourly, as docs/operating.md says", 0, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sim := forgesim.New()
				mustSim(t, sim.SeedInstallations(2, 0))
				tr, stop := forgetest.ServeSimOnPipe(sim)
				defer stop()
				a, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: tr, RelistEvery: tc.configured})
				mustSim(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- a.Run(ctx) }()
				synctest.Wait()
				if n := len(a.Installations()); n != 2 {
					t.Fatalf("after Run starts: %d installations, want 2: it lists at once", n)
				}
				// Added with no webhook configured: only the re-list finds it.
				mustSim(t, sim.AddInstallation(3, "late"))
				time.Sleep(tc.period - time.Second)
				synctest.Wait()
				if n := len(a.Installations()); n != 2 {
					t.Fatalf("a second before the period: %d installations, want 2", n)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if n := len(a.Installations()); n != 3 {
					t.Fatalf("at the period: %d installations, want 3: the re-list is the safety net", n)
				}
				if n := sim.Requests(forgesim.Filter{Route: listRoute}); n != 2 {
					t.Fatalf("lists: %d, want 2 in %v", n, tc.period)
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("Run after cancel: %v, want context.Canceled", err)
				}
			})
		})
	}
}

// lossy is a transport whose answers are lost while down is set: the
// fault of a network or forge that does not answer.
type lossy struct {
	next http.RoundTripper
	down atomic.Bool
}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.down.Load() {
		return nil, errors.New("answer lost")
	}
	return l.next.RoundTrip(req)
}

// TestRunListsAgainSoonAfterAFailedList pins Run's retry: a start-up list
// whose answer is lost is tried again after 30 s (and up to a quarter
// more), doubling with each failure in a row, not after the period; one
// that GitHub's App budget refuses is tried again after the budget's
// reset, not before; a replica refused at start serves every installation
// once the list goes through.
func TestRunListsAgainSoonAfterAFailedList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 2)
		net := &lossy{next: tr}
		net.down.Store(true)
		rec := &records{}
		a := pipeApp(t, tr, forge.AppConfig{Next: net, RelistEvery: 3 * time.Hour, Logger: slog.New(rec)})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go a.Run(ctx)
		synctest.Wait()
		if n := len(a.Installations()); n != 0 {
			t.Fatalf("after a lost list: %d installations, want 0", n)
		}
		// 30 s, doubled: the second try comes 30–37.5 s after the first,
		// the third 60–75 s after the second: 90–112.5 s after the first.
		time.Sleep(38 * time.Second)
		synctest.Wait()
		net.down.Store(false)
		time.Sleep(52*time.Second - time.Millisecond)
		synctest.Wait()
		if n := len(a.Installations()); n != 0 {
			t.Fatalf("before the third try: %d installations, want 0: the wait doubles", n)
		}
		time.Sleep(23 * time.Second)
		synctest.Wait()
		if n := len(a.Installations()); n != 2 {
			t.Fatalf("after the third try: %d installations, want 2: a failed list is tried again within minutes, not the period", n)
		}

		// The App's budget spent: refused until the window's reset, about
		// an hour later (the client holds back what it sends before).
		failed := func() (n int) {
			for _, m := range rec.messages() {
				if strings.HasPrefix(m, "forge: listing the App's installations failed") {
					n++
				}
			}
			return n
		}
		mustSim(t, sim.SetBudget("app:42", 0))
		mustSim(t, sim.AddInstallation(3, "late"))
		time.Sleep(3 * time.Hour) // the period: a list, refused
		synctest.Wait()
		refused := failed()
		mustSim(t, sim.SetBudget("app:42", 5000))
		time.Sleep(40 * time.Minute) // a retry every 30 s, doubling, would have failed 6 times more
		synctest.Wait()
		if failed() != refused {
			t.Fatalf("%d failed lists after the refusal, want none: a list refused by the budget is tried again at its reset", failed()-refused)
		}
		time.Sleep(36 * time.Minute) // the reset, within the hour, and at most a minute more
		synctest.Wait()
		if n := len(a.Installations()); n != 3 {
			t.Fatalf("after the budget's reset: %d installations, want 3: the refused list is tried again at the reset", n)
		}
	})
}

// slowLists is a transport that counts the App's installation lists it
// carries and takes 50 ms of the bubble's time over each, as a network
// does: a client that asks again at once is seen asking many times.
type slowLists struct {
	next  http.RoundTripper
	lists atomic.Int64
}

func (s *slowLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/app/installations" {
		s.lists.Add(1)
	}
	time.Sleep(50 * time.Millisecond)
	return s.next.RoundTrip(req)
}

// TestARefusedListWhoseResetHasPassedOnTheReplicasClockWaitsAMinute pins
// the floor under a primary limit's wait: GitHub's x-ratelimit-reset is on
// GitHub's clock, and a replica whose clock runs ahead reads a refusal's
// reset as already past. Run then asked again at once, and again, each
// request refused, for as long as the clocks differ: GitHub warns that an
// integration that keeps sending while limited may be banned ("Rate limits
// for the REST API", https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit).
// A refusal whose reset is not ahead holds the resource back a minute, and
// the list is tried again after it.
func TestARefusedListWhoseResetHasPassedOnTheReplicasClockWaitsAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// GitHub's clock two minutes behind the replica's.
		sim, tr := pipeSim(t, 2, forgesim.WithClock(func() time.Time { return time.Now().Add(-2 * time.Minute) }))
		mustSim(t, sim.SetBudget("app:42", 1))
		net := &slowLists{next: tr}
		a := pipeApp(t, tr, forge.AppConfig{Next: net, RelistEvery: 3 * time.Hour})
		mustSim(t, a.Relist(context.Background())) // opens the App's window: its reset is 58 minutes ahead on the replica's clock
		time.Sleep(59 * time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := net.lists.Load()
		go a.Run(ctx) // lists at once: refused, its reset a minute past on the replica's clock and a minute ahead on GitHub's
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if n := net.lists.Load() - before; n > 3 {
			t.Errorf("%d lists in the 3 minutes after a refusal whose reset had passed on the replica's clock, want at most 3: a refusal is waited out, not asked again at once", n)
		}
		if n := len(a.Installations()); n != 2 {
			t.Errorf("after GitHub's reset: %d installations, want 2: the refused list is tried again", n)
		}
		cancel()
		synctest.Wait()
	})
}

func TestHourlyLineNamesTheBusiestInstallations(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(7, 1))
	rec := &records{}
	// The line's clock stands still, so the requests fall in one hour;
	// the simulator's and ghinstallation's run, so tokens live an hour.
	clock := newTestClock(time.Now())
	a := newApp(t, srv, forge.AppConfig{Now: clock.Now, Logger: slog.New(rec), ETagCacheBytes: -1})
	mustSim(t, a.Relist(context.Background()))
	// Installation i reads i times, plus its token: i+1 requests.
	for i := int64(1); i <= 7; i++ {
		c, err := a.Installation(i)
		mustSim(t, err)
		for range i {
			if _, err := c.ListIssues(laneCtx(forge.LaneBoardSync), "org-"+strconv.FormatInt(i, 10), "repo-1", time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Close()
	msgs := rec.messages()
	if len(msgs) != 1 {
		t.Fatalf("lines: %q, want 1", msgs)
	}
	want := "; by installation: 7 8, 6 7, 5 6, 4 5, 3 4, 2 others 5"
	if !strings.HasSuffix(msgs[0], want) {
		t.Fatalf("line %q\nwant it to end %q: the 5 busiest installations, the rest summed", msgs[0], want)
	}
	if !strings.Contains(msgs[0], "REST app 1,") && !strings.Contains(msgs[0], "REST app 1;") {
		t.Fatalf("line %q: want the App's own list counted on lane app", msgs[0])
	}
	group := map[string]int64{}
	rec.all()[0].Attrs(func(at slog.Attr) bool {
		if at.Key == "installations" {
			for _, g := range at.Value.Group() {
				group[g.Key] = g.Value.Int64()
			}
		}
		return true
	})
	if len(group) != 6 || group["7"] != 8 || group["3"] != 4 || group["others"] != 5 {
		t.Fatalf("slog group installations = %v, want the same figures as the text: 7..3 and others 5", group)
	}
}

func TestOnlyTheLowestBudgetsGetAnInstallationSeries(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(4, 1))
	reg := prometheus.NewRegistry()
	a := newApp(t, srv, forge.AppConfig{Registerer: reg, LowestBudgets: 2, ETagCacheBytes: -1})
	mustSim(t, a.Relist(context.Background()))
	// Installation i spends i reads; 4 never reads, so has no figure.
	for i := int64(1); i <= 3; i++ {
		c, err := a.Installation(i)
		mustSim(t, err)
		for range i {
			if _, err := c.ListIssues(context.Background(), "org-"+strconv.FormatInt(i, 10), "repo-1", time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mfs, err := reg.Gather()
	mustSim(t, err)
	got := map[string]float64{}
	var known float64
	for _, mf := range mfs {
		switch mf.GetName() {
		case "forge_installation_rate_limit_remaining":
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		case "forge_installations":
			known = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	want := map[string]float64{"3": forgesim.DefaultBudget - 3, "2": forgesim.DefaultBudget - 2}
	if len(got) != len(want) || got["3"] != want["3"] || got["2"] != want["2"] {
		t.Fatalf("forge_installation_rate_limit_remaining = %v, want %v: a series only for the 2 installations with the least left", got, want)
	}
	if known != 4 {
		t.Fatalf("forge_installations = %v, want 4", known)
	}
}

func TestNewAppNamesTheBadField(t *testing.T) {
	key := forgetest.AppKey(t)
	cases := []struct {
		cfg   forge.AppConfig
		field string
	}{
		{forge.AppConfig{PrivateKey: key}, "AppID"},
		{forge.AppConfig{AppID: 1, PrivateKey: []byte("nope")}, "PrivateKey"},
		{forge.AppConfig{AppID: 1, PrivateKey: key, RelistEvery: -time.Second}, "RelistEvery"},
		{forge.AppConfig{AppID: 1, PrivateKey: key, LowestBudgets: -1}, "LowestBudgets"},
		{forge.AppConfig{AppID: 1, PrivateKey: key, BaseURL: "ftp://x"}, "BaseURL"},
	}
	for _, tc := range cases {
		_, err := forge.NewApp(tc.cfg)
		if !errors.Is(err, forge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("NewApp(%s bad): %v, want ErrInvalidConfig naming %s", tc.field, err, tc.field)
		}
	}
}

func mustSim(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBudgetsAreEachInstallationsOwnFigures pins AppClient.Budgets: an
// installation's figures are those its own answers carried (core and
// GraphQL apart), another installation's spending does not move them, and
// an installation that made no request, or an unknown one, has none, without
// a request being sent to find out.
func TestBudgetsAreEachInstallationsOwnFigures(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(3, 1))
	a := newApp(t, srv, forge.AppConfig{ETagCacheBytes: -1})
	mustSim(t, a.Relist(context.Background()))
	spend := func(id int64, n int) {
		t.Helper()
		c, err := a.Installation(id)
		mustSim(t, err)
		for range n {
			if _, err := c.ListIssues(context.Background(), "org-"+strconv.FormatInt(id, 10), "repo-1", time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	spend(1, 2)
	spend(2, 5)
	sent := sim.Requests(forgesim.Filter{})
	for _, c := range []struct {
		id   int64
		want string
		why  string
	}{
		{1, fmt.Sprintf("[core %d of %d]", forgesim.DefaultBudget-2, forgesim.DefaultBudget), "installation 1's two reads, not installation 2's five"},
		{2, fmt.Sprintf("[core %d of %d]", forgesim.DefaultBudget-5, forgesim.DefaultBudget), "installation 2's own five reads"},
		{3, "[]", "an installation that made no request has no figure"},
		{99, "[]", "an installation not known has none"},
	} {
		var got []string
		for _, rl := range a.Budgets(c.id) {
			got = append(got, fmt.Sprintf("%s %d of %d", rl.Resource, rl.Remaining, rl.Limit))
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("Budgets(%d) = %s, want %s: %s", c.id, s, c.want, c.why)
		}
	}
	if after := sim.Requests(forgesim.Filter{}); after != sent {
		t.Errorf("the simulator got %d requests during Budgets, want 0: Budgets reads what answers said", after-sent)
	}
}

// TestInstallationsRefreshTheirTokensConcurrently pins that installation
// clients are safe to use concurrently from their first request, when
// each mints its token at once (run with -race): an App-mode server sweeps
// several installations at a time.
func TestInstallationsRefreshTheirTokensConcurrently(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(8, 1))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	errs := make(chan error, 8)
	for id := int64(1); id <= 8; id++ {
		go func() {
			c, err := a.Installation(id)
			if err == nil {
				_, err = c.GetPull(context.Background(), "org-"+strconv.FormatInt(id, 10), "repo-1", 1)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil && !errors.Is(err, forge.ErrNotFound) {
			t.Errorf("a first request of an installation: %v, want it sent (the pull does not exist: 404)", err)
		}
	}
	if minted := sim.Requests(forgesim.Filter{Route: "POST /app/installations/{id}/access_tokens"}); minted != 8 {
		t.Errorf("tokens minted: %d, want 8: each installation mints its own", minted)
	}
}

// mints picks the token mints.
func mints(req *http.Request) bool { return strings.HasSuffix(req.URL.Path, "/access_tokens") }

// TestAppJWTRequestsGoOneAtATime pins the App JWT's gate: installations
// minting their tokens at once mint them in turn, so their response times
// never sum to more than the time passed (GitHub's CPU-time limit allows
// 90 s a minute), and every installation still gets its own.
func TestAppJWTRequestsGoOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		mustSim(t, sim.SeedInstallations(8, 1))
		pipe, stop := forgetest.ServeSimOnPipe(sim)
		defer stop()
		tr := &forgetest.InFlight{Next: pipe, Match: mints, Hold: time.Second}
		a, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: tr})
		mustSim(t, err)
		mustSim(t, a.Relist(context.Background()))
		start := time.Now()
		var wg sync.WaitGroup
		for id := int64(1); id <= 8; id++ {
			wg.Go(func() {
				c, err := a.Installation(id)
				if err == nil {
					_, err = c.GetPull(context.Background(), "org-"+strconv.FormatInt(id, 10), "repo-1", 1)
				}
				if err != nil && !errors.Is(err, forge.ErrNotFound) {
					t.Errorf("installation %d's first request: %v, want it sent", id, err)
				}
			})
		}
		wg.Wait()
		if most := tr.Most(); most != 1 {
			t.Errorf("token mints in flight at once: %d, want 1: the App's JWT requests go one at a time", most)
		}
		if took := time.Since(start); took < 8*time.Second {
			t.Errorf("8 mints of a second each took %v, want at least 8s: in turn", took)
		}
		if minted := sim.Requests(forgesim.Filter{Route: "POST /app/installations/{id}/access_tokens"}); minted != 8 {
			t.Errorf("tokens minted: %d, want 8: each installation mints its own", minted)
		}
	})
}

// TestAppJWTMintSentIsWaitedFor pins that a mint once sent is waited for
// even when its caller's context ends first: GitHub spends its response
// time either way, the next JWT request waits for the answer, and the
// token serves the installation's next request without a second mint.
func TestAppJWTMintSentIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		mustSim(t, sim.SeedInstallations(2, 1))
		pipe, stop := forgetest.ServeSimOnPipe(sim)
		defer stop()
		tr := &forgetest.InFlight{Next: pipe, Match: mints, Hold: time.Second}
		a, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: tr})
		mustSim(t, err)
		mustSim(t, a.Relist(context.Background()))
		start := time.Now()
		c1, _ := a.Installation(1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		go func() {
			time.Sleep(200 * time.Millisecond)
			c2, _ := a.Installation(2)
			if _, err := c2.GetPull(context.Background(), "org-2", "repo-1", 1); err != nil && !errors.Is(err, forge.ErrNotFound) {
				t.Errorf("installation 2's first request: %v", err)
			}
		}()
		if _, err := c1.GetPull(ctx, "org-1", "repo-1", 1); err == nil {
			t.Fatalf("a request whose context ended during its mint: got no error")
		}
		if _, err := c1.GetPull(context.Background(), "org-1", "repo-1", 1); err != nil && !errors.Is(err, forge.ErrNotFound) {
			t.Fatalf("installation 1's next request: %v", err)
		}
		time.Sleep(3 * time.Second) // every mint answered
		began := tr.Began()
		if len(began) != 2 || began[1].Sub(start) < time.Second {
			t.Errorf("mints began at %v, want 2, the second at 1s or later: installation 1's token kept, the gate held until GitHub answered", began)
		}
	})
}

// TestAppJWTMintIsWaitedForAtMostJWTAnswerWaitAfterItsCallerGivesUp pins
// the bound on that wait: a mint GitHub does not answer, whose caller's
// context is cancelled and had no deadline, is given up 10 s (jwtAnswerWait)
// after the cancel, and the request that needed it returns then with the
// cancel's error, rather than holding the installation's token and the
// App's JWT gate until GitHub answers.
func TestAppJWTMintIsWaitedForAtMostJWTAnswerWaitAfterItsCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		mustSim(t, sim.SeedInstallations(1, 1))
		pipe, stop := forgetest.ServeSimOnPipe(sim)
		defer stop()
		// A mint that never answers: the simulator's latency model would
		// end it at GitHub's 10 s timeout, which this wait must not need.
		a, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: hangingMints{pipe}})
		mustSim(t, err)
		mustSim(t, a.Relist(context.Background()))
		c, _ := a.Installation(1)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err = c.GetPull(ctx, "org-1", "repo-1", 1)
		if took := time.Since(start); took > 100*time.Millisecond+10*time.Second || !errors.Is(err, context.Canceled) {
			t.Errorf("a request whose context was cancelled at 100ms during its mint: returned after %v with %v, want context.Canceled within 10s of the cancel", took, err)
		}
		// The App's next JWT request waits for the gate the mint holds,
		// which is given up with the mint.
		mustSim(t, a.Relist(context.Background()))
		if took := time.Since(start); took > 100*time.Millisecond+10*time.Second {
			t.Errorf("the App's next JWT request answered %v after the start, want within 10s of the cancel: the mint's hold on the App's JWT gate ends with it", took)
		}
	})
}

// hangingMints never answers a token mint: it returns only once the
// mint's context ends.
type hangingMints struct{ next http.RoundTripper }

func (h hangingMints) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/access_tokens") {
		return h.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// TestMintGivesTheInstallationItsToken pins Mint: it mints installation
// id's token once, the Client's requests then send it without minting
// again, and an unknown installation is ErrNotInstalled.
func TestMintGivesTheInstallationItsToken(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(1, 1))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	const mints = "POST /app/installations/{id}/access_tokens"
	for range 2 {
		if err := a.Mint(context.Background(), 1); err != nil {
			t.Fatalf("Mint(1): %v", err)
		}
	}
	c, _ := a.Installation(1)
	if _, err := c.GetPull(context.Background(), "org-1", "repo-1", 1); err != nil && !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("installation 1's request after Mint: %v", err)
	}
	if n := sim.Requests(forgesim.Filter{Route: mints}); n != 1 {
		t.Errorf("tokens minted: %d, want 1: Mint's token is the one the Client sends", n)
	}
	if err := a.Mint(context.Background(), 9); !errors.Is(err, forge.ErrNotInstalled) {
		t.Errorf("Mint(9) = %v, want ErrNotInstalled", err)
	}
}

// TestASecondaryLimitedMintHoldsTheAppsJWTRequestsUntilRetryAfter pins
// that a token mint GitHub refuses with a secondary limit (403,
// retry-after 90) fails the request that needed it with a sent
// *RateLimitError on lane auth resetting at now + retry-after, and that
// until then the App's JWT requests, mints and lists alike, are held back
// unsent: GitHub says not to retry before retry-after ("Rate limits for
// the REST API", Exceeding the rate limit), and limits the JWT's requests
// as one principal.
func TestASecondaryLimitedMintHoldsTheAppsJWTRequestsUntilRetryAfter(t *testing.T) {
	clk := newTestClock(time.Date(2026, 9, 30, 9, 0, 0, 0, time.UTC))
	sim, srv := startSim(t, forgesim.WithClock(clk.Now))
	mustSim(t, sim.SeedInstallations(1, 1))
	a := newApp(t, srv, forge.AppConfig{Now: clk.Now})
	mustSim(t, a.Relist(context.Background()))
	mustSim(t, sim.SecondaryLimit("app:42", 90*time.Second, 1))
	c, _ := a.Installation(1)
	read := func() error {
		_, err := c.GetPull(laneCtx(forge.LaneMergeGateSweeper), "org-1", "repo-1", 1)
		return err
	}
	reset := clk.Now().Add(90 * time.Second)
	var rl *forge.RateLimitError
	if err := read(); !errors.As(err, &rl) || !rl.Sent || rl.Cause != forge.CauseSecondary || !rl.Reset.Equal(reset) || rl.Lane != forge.LaneAuth {
		t.Fatalf("a request whose mint GitHub refused with retry-after 90: %v, want a sent secondary *RateLimitError on lane auth resetting at %v: a caller resuming at Reset waits the retry-after out", err, reset)
	}
	clk.Set(reset.Add(-time.Second))
	for _, step := range []struct {
		name string
		call func() error
	}{
		{"the installation's next request", read},
		{"Mint", func() error { return a.Mint(context.Background(), 1) }},
		{"Relist", func() error { return a.Relist(context.Background()) }},
	} {
		if err := step.call(); !errors.As(err, &rl) || rl.Sent || rl.Cause != forge.CauseSecondary || !rl.Reset.Equal(reset) {
			t.Errorf("%s within retry-after: %v, want a secondary *RateLimitError held back until %v", step.name, err, reset)
		}
	}
	if n := sim.Requests(forgesim.Filter{Token: "app:42"}); n != 2 {
		t.Errorf("requests made with the App's JWT: %d, want 2 (the list, the refused mint): nothing is sent within retry-after", n)
	}
	clk.Set(reset)
	if err := read(); err != nil && !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("the installation's request at retry-after's end: %v, want its token minted and the request sent", err)
	}
}

// TestMintIsChargedToLaneAuthAndTheInstallation pins that a token minted
// by Mint (the sweeper's way) is counted as the installation's request,
// on lane auth, as one its Client's own request needed: the
// installation's Client counts it, and the App's own requests
// (installation 0) do not.
func TestMintIsChargedToLaneAuthAndTheInstallation(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(1, 1))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	mustSim(t, a.Mint(context.Background(), 1))
	if n, app := appCount(a, forge.LaneAuth, http.StatusCreated, 1), appCount(a, forge.LaneAuth, -1, 0); n != 1 || app != 0 {
		t.Errorf("mints counted on lane auth: %d for installation 1, %d for the App's own, want 1 and 0", n, app)
	}
	c, _ := a.Installation(1)
	if n := countOf(c, forge.LaneAuth, -1); n != 1 {
		t.Errorf("installation 1's Client counts %d mints, want 1: its token's mint is its own", n)
	}
}

// TestRunInTurnListsOnlyInItsTurn pins RunInTurn and RelistInTurn: each
// list waits for its turn and ends it when done, the periodic ones too;
// a list whose ctx ends while it waits for its turn is not made.
func TestRunInTurnListsOnlyInItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		mustSim(t, sim.SeedInstallations(2, 0))
		tr, stop := forgetest.ServeSimOnPipe(sim)
		defer stop()
		a, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: tr, RelistEvery: time.Hour})
		mustSim(t, err)
		lists := func() int64 { return sim.Requests(forgesim.Filter{Route: "GET /app/installations"}) }
		open := make(chan struct{})
		var turns, dones atomic.Int32
		turn := func(ctx context.Context) func() {
			turns.Add(1)
			select {
			case <-open:
			case <-ctx.Done():
			}
			return func() { dones.Add(1) }
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.RunInTurn(ctx, turn) }()
		synctest.Wait()
		if n := lists(); n != 0 || turns.Load() != 1 {
			t.Fatalf("before its turn: %d lists, %d turns asked; want 0 and 1", n, turns.Load())
		}
		close(open)
		synctest.Wait()
		if n := lists(); n != 1 || dones.Load() != 1 || len(a.Installations()) != 2 {
			t.Fatalf("in its turn: %d lists, %d turns ended, %d installations; want 1, 1, 2", n, dones.Load(), len(a.Installations()))
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := lists(); n != 2 || turns.Load() != 2 || dones.Load() != 2 {
			t.Fatalf("after the period: %d lists, %d turns asked, %d ended; want 2 each", n, turns.Load(), dones.Load())
		}
		cancel()
		<-done

		never := func(ctx context.Context) func() { <-ctx.Done(); return func() {} }
		wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
		defer wcancel()
		if err := a.RelistInTurn(wctx, never); !errors.Is(err, context.DeadlineExceeded) || lists() != 2 {
			t.Fatalf("a list whose turn never came: %v, %d lists; want DeadlineExceeded and none made", err, lists()-2)
		}
	})
}

// TestRelistRefusesAnInstallationWithoutItsID pins Relist against a
// malformed list: an installation whose id is missing (GitHub's schema
// requires it) fails the whole list with ErrMalformedAnswer naming the id,
// and the known set stays as the last whole list made it, rather than an
// installation 0 added and the hidden one dropped.
func TestRelistRefusesAnInstallationWithoutItsID(t *testing.T) {
	var body atomic.Value
	body.Store(`[{"id": 1, "account": {"login": "org-1"}}, {"id": 2, "account": {"login": "org-2"}}]`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	a := newApp(t, srv, forge.AppConfig{})
	if err := a.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	whole := a.Installations()
	if len(whole) != 2 {
		t.Fatalf("Installations() = %+v after a whole list, want 2", whole)
	}
	for _, malformed := range []string{
		`[{"id": 1, "account": {"login": "org-1"}}, {"account": {"login": "org-2"}}]`,
		`[{"id": 1, "account": {"login": "org-1"}}, {"id": 0, "account": {"login": "org-2"}}]`,
		`[{"id": 1, "account": {"login": "org-1"}}, {"id": -2, "account": {"login": "org-2"}}]`,
	} {
		body.Store(malformed)
		err := a.Relist(context.Background())
		if !errors.Is(err, forge.ErrMalformedAnswer) || !strings.Contains(err.Error(), "id") || !strings.Contains(err.Error(), "org-2") {
			t.Errorf("Relist of %s: got %v, want forge.ErrMalformedAnswer naming the id and its account", malformed, err)
		}
		if got := a.Installations(); fmt.Sprint(got) != fmt.Sprint(whole) {
			t.Errorf("Installations() = %+v after the malformed list %s, want %+v: a refused list changes nothing", got, malformed, whole)
		}
	}
	body.Store(`[]`)
	if err := a.Relist(context.Background()); err != nil || len(a.Installations()) != 0 {
		t.Errorf("Relist of an empty list: %v, %d installations; want nil and none: an App installed nowhere is a whole answer", err, len(a.Installations()))
	}
}

// TestARequestRefusedForTheInstallationsSuspensionFailsWithErrSuspended
// pins what an installation's Client does with a token minted before its
// installation's suspension, which GitHub refuses 403 "This installation
// has been suspended": the request, REST or GraphQL, fails with an error
// wrapping ErrSuspended, neither ErrForbidden nor a rate limit, the
// rate gate holds nothing back for it, and the token is dropped from the
// TokenStore, so the next request, once the installation is unsuspended,
// is sent with a token minted afresh.
func TestARequestRefusedForTheInstallationsSuspensionFailsWithErrSuspended(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(1, 1))
	mustSim(t, sim.SeedPull("org-1", "repo-1", 1, "sha", "open"))
	store := new(forge.MemoryTokenStore)
	a := newApp(t, srv, forge.AppConfig{Tokens: store})
	mustSim(t, a.Relist(context.Background()))
	const mints = "POST /app/installations/{id}/access_tokens"
	mustSim(t, a.Mint(context.Background(), 1))
	c, _ := a.Installation(1)
	mustSim(t, sim.SuspendInstallation(1))
	calls := []struct {
		name string
		call func() error
	}{
		{"REST", func() error { _, err := c.GetPull(context.Background(), "org-1", "repo-1", 1); return err }},
		{"GraphQL", func() error {
			_, err := c.PullStates(context.Background(), []forge.PullRef{{Owner: "org-1", Repo: "repo-1", Number: 1}})
			return err
		}},
	}
	for _, call := range calls {
		if _, ok, _ := store.Get(context.Background(), 1); !ok {
			mustSim(t, sim.UnsuspendInstallation(1))
			mustSim(t, a.Mint(context.Background(), 1)) // a token from before the suspension again
			mustSim(t, sim.SuspendInstallation(1))
		}
		err := call.call()
		if !errors.Is(err, forge.ErrSuspended) || errors.Is(err, forge.ErrForbidden) || errors.Is(err, forge.ErrRateLimited) {
			t.Errorf("%s read with a token minted before the suspension: %v, want ErrSuspended, not ErrForbidden nor a rate limit", call.name, err)
		}
		if refused := (*forge.SuspendedTokenError)(nil); !errors.As(err, &refused) || refused.Installation != 1 {
			t.Errorf("%s read with a token minted before the suspension: %v, want a SuspendedTokenError naming installation 1: a caller checks the installation it names", call.name, err)
		}
		if _, ok, _ := store.Get(context.Background(), 1); ok {
			t.Errorf("%s: the refused token is still in the TokenStore, want it dropped", call.name)
		}
	}
	minted := sim.Requests(forgesim.Filter{Route: mints})
	mustSim(t, sim.UnsuspendInstallation(1))
	for _, call := range calls {
		if err := call.call(); err != nil {
			t.Errorf("%s read after the unsuspension: %v, want it answered: nothing held it back", call.name, err)
		}
	}
	if n := sim.Requests(forgesim.Filter{Route: mints}) - minted; n != 1 {
		t.Errorf("tokens minted after the unsuspension: %d, want 1: the refused token was dropped", n)
	}
}

// TestAReplicaToldOfADeletionNoLongerListsItSuspended pins Apply's rule
// for a gone installation: a replica told (Apply) of a suspension lists
// the installation suspended, since GitHub's suspended_at, as the replica
// whose webhook it was does; told then of its deletion, it lists it no
// more, as that replica does (HandleInstallationEvent's deleted), without
// waiting for a re-list.
func TestAReplicaToldOfADeletionNoLongerListsItSuspended(t *testing.T) {
	var a, b *forge.AppClient
	sim, srv := startSim(t, relayWebhooks(t, &a, &b))
	a, b = newApp(t, srv, forge.AppConfig{}), newApp(t, srv, forge.AppConfig{})
	mustSim(t, sim.AddInstallation(9, "acme", "acme/app"))
	steps := []struct {
		rule          string
		change        func() error
		wantSuspended int
	}{
		{"a suspension is listed where it was told", func() error { return sim.SuspendInstallation(9) }, 1},
		{"a deletion ends the listing where it was told", func() error { return sim.RemoveInstallation(9) }, 0},
	}
	for _, st := range steps {
		mustSim(t, st.change())
		for name, c := range map[string]*forge.AppClient{"handled the webhook": a, "told of the change": b} {
			if got := c.Suspended(); len(got) != st.wantSuspended || (len(got) == 1 && got[0].ID != 9) {
				t.Errorf("replica that %s lists suspended %+v, want %d (installation 9): %s", name, got, st.wantSuspended, st.rule)
			}
		}
		told, heard := b.Suspended(), a.Suspended()
		if len(told) == 1 && len(heard) == 1 && (heard[0].At.IsZero() || !told[0].At.Equal(heard[0].At)) {
			t.Errorf("installation 9 suspended since %v where it was told, %v where the webhook was handled; want GitHub's suspended_at on both: the change carries it", told[0].At, heard[0].At)
		}
	}
}

// failPage loses the answer to every list of the App's installations
// asking for page while on is set: a list that fails past its first page.
type failPage struct {
	next http.RoundTripper
	page string
	on   atomic.Bool
}

func (f *failPage) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.on.Load() && req.URL.Path == "/app/installations" && req.URL.Query().Get("page") == f.page {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("answer lost")
	}
	return f.next.RoundTrip(req)
}

// TestAListThatFailsPastItsFirstPageChangesNothing pins Relist's
// all-or-nothing rule: a list whose second page fails is an error, and
// the known set, the suspended ones and LastListed stay as the last
// complete list left them; read as the whole set, its first page would
// drop every installation of the pages after it.
func TestAListThatFailsPastItsFirstPageChangesNothing(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(150, 0))
	net := &failPage{next: srv.Client().Transport, page: "2"}
	a := newApp(t, srv, forge.AppConfig{Next: net})
	mustSim(t, a.Relist(context.Background()))
	listed := a.LastListed()
	mustSim(t, sim.SuspendInstallation(3))
	mustSim(t, sim.AddInstallation(151, "late"))
	net.on.Store(true)
	if err := a.Relist(context.Background()); err == nil {
		t.Fatalf("Relist with its second page lost = nil, want an error")
	}
	if n := len(a.Installations()); n != 150 {
		t.Errorf("known after a list that failed on its second page: %d installations, want the 150 of the last complete list", n)
	}
	if got := a.Suspended(); len(got) != 0 {
		t.Errorf("suspended after the failed list: %v, want none: a failed list changes nothing known", got)
	}
	if !a.LastListed().Equal(listed) {
		t.Errorf("LastListed after the failed list: %v, want %v, the last complete one", a.LastListed(), listed)
	}
}

// TestARefusedListIsTriedAgainWithinThePeriodAndAMinute pins the bounds
// of Run's wait after a list a rate limit refused: at the limit's reset,
// but never later than the period (the App's budget spent for good, a
// 20-minute period tries every 20 minutes, not at each hourly reset),
// and later by a minute at most at random (a quarter of 20 minutes would
// be 5).
func TestARefusedListIsTriedAgainWithinThePeriodAndAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim, tr := pipeSim(t, 2)
		rec := &records{}
		a := pipeApp(t, tr, forge.AppConfig{RelistEvery: 20 * time.Minute, Logger: slog.New(rec)})
		mustSim(t, a.Relist(context.Background())) // opens the App's window: its reset an hour ahead
		mustSim(t, sim.SetBudget("app:42", 0))
		ctx, cancel := context.WithCancel(context.Background())
		go a.Run(ctx)
		time.Sleep(150 * time.Minute)
		cancel()
		synctest.Wait()
		var failed []time.Time
		for _, r := range rec.all() {
			if strings.HasPrefix(r.Message, "forge: listing the App's installations failed") {
				failed = append(failed, r.Time)
			}
		}
		if len(failed) < 8 {
			t.Fatalf("%d refused lists in 150 minutes, want 8 or more: one at once, then one every 21 minutes at most", len(failed))
		}
		for i := 1; i < len(failed); i++ {
			if d := failed[i].Sub(failed[i-1]); d > 21*time.Minute {
				t.Errorf("refused list %d came %v after the one before, want 21 minutes at most: the period bounds a reset's wait, and a minute its spread", i+1, d)
			}
		}
	})
}

// TestARepositoryOfADroppedInstallationIsResolvedAgain pins that dropping
// an installation forgets the repositories resolved to it: a repository
// whose installation a list dropped, covered since by another one (no
// webhook said so), resolves to that one at its next ForRepo instead of
// failing on the dropped one.
func TestARepositoryOfADroppedInstallationIsResolvedAgain(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.AddInstallation(1, "acme", "acme/app"))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	if _, id, err := a.ForRepo(context.Background(), "acme", "app"); err != nil || id != 1 {
		t.Fatalf("ForRepo(acme/app) = %d, %v; want installation 1", id, err)
	}
	mustSim(t, sim.RemoveInstallation(1))
	mustSim(t, sim.AddInstallation(2, "acme", "acme/app"))
	mustSim(t, a.Relist(context.Background()))
	if _, id, err := a.ForRepo(context.Background(), "acme", "app"); err != nil || id != 2 {
		t.Errorf("ForRepo(acme/app) after a list dropped installation 1 = %d, %v; want installation 2, which covers it now", id, err)
	}
}

// TestTheZeroChangeChangesNothing pins InstallationChange's zero value,
// "changed nothing": Apply of a change without a positive ID adds no
// installation and leaves Changed as it was.
func TestTheZeroChangeChangesNothing(t *testing.T) {
	_, srv := startSim(t)
	a := newApp(t, srv, forge.AppConfig{})
	for _, ch := range []forge.InstallationChange{{}, {Account: "acme"}, {ID: -1, Repositories: true}} {
		a.Apply(ch)
	}
	if got := a.Installations(); len(got) != 0 {
		t.Errorf("known after changes without an ID: %v, want none", got)
	}
	if !a.Changed().IsZero() {
		t.Errorf("Changed after changes without an ID: %v, want zero", a.Changed())
	}
}

// TestARemovalFromAnotherInstallationKeepsTheRepositoryResolved pins
// HandleInstallationRepositoriesEvent's removal: a repository is
// forgotten only when it resolves to the installation the event removes
// it from, so a removal from its old installation that arrives after the
// repository was added to a new one leaves it resolved to the new one,
// and ForRepo asks GitHub nothing.
func TestARemovalFromAnotherInstallationKeepsTheRepositoryResolved(t *testing.T) {
	_, srv := startSim(t)
	a := newApp(t, srv, forge.AppConfig{})
	repo := []*github.Repository{{FullName: github.Ptr("acme/app")}}
	a.HandleInstallationRepositoriesEvent(&github.InstallationRepositoriesEvent{Action: github.Ptr("added"),
		Installation: &github.Installation{ID: github.Ptr(int64(2))}, RepositoriesAdded: repo})
	a.HandleInstallationRepositoriesEvent(&github.InstallationRepositoriesEvent{Action: github.Ptr("removed"),
		Installation: &github.Installation{ID: github.Ptr(int64(1))}, RepositoriesRemoved: repo})
	_, id, err := a.ForRepo(context.Background(), "acme", "app")
	if err != nil || id != 2 {
		t.Errorf("ForRepo(acme/app) = %d, %v; want installation 2: the removal was from installation 1", id, err)
	}
	if n := appCount(a, forge.LaneApp, -1, -1); n != 0 {
		t.Errorf("requests on lane app: %d, want 0: the repository is still resolved", n)
	}
}

// TestTakeFoundTellsTheInstallationsLearnedOtherwiseThanByNews pins
// TakeFound: an installation first known by a repository's look-up, or
// by a list after the first (its created webhook lost), is returned
// once, with its account, in order of id; one known from the first
// list, already known, or known by another replica's news (Apply) is
// not, nor one a list dropped before the call.
func TestTakeFoundTellsTheInstallationsLearnedOtherwiseThanByNews(t *testing.T) {
	sim, srv := startSim(t)
	ctx := context.Background()
	mustSim(t, sim.SeedInstallations(2, 1))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(ctx))
	if got := a.TakeFound(); len(got) != 0 {
		t.Fatalf("TakeFound after the first list = %+v, want none: every replica makes its own", got)
	}
	for _, id := range []int64{5, 3, 4} {
		mustSim(t, sim.AddInstallation(id, fmt.Sprintf("org-%d", id), fmt.Sprintf("org-%d/repo-1", id)))
	}
	for _, owner := range []string{"org-5", "org-1"} {
		if _, _, err := a.ForRepo(ctx, owner, "repo-1"); err != nil {
			t.Fatalf("ForRepo(%s/repo-1): %v", owner, err)
		}
	}
	a.Apply(forge.InstallationChange{ID: 6, Account: "org-6"})
	mustSim(t, a.Relist(ctx))
	want := []forge.InstallationChange{{ID: 3, Account: "org-3"}, {ID: 4, Account: "org-4"}, {ID: 5, Account: "org-5"}}
	if got := a.TakeFound(); !slices.Equal(got, want) {
		t.Errorf("TakeFound = %+v, want %+v: 5 found by a look-up, 3 and 4 by a later list; not 1 (known) nor 6 (news)", got, want)
	}
	if got := a.TakeFound(); len(got) != 0 {
		t.Errorf("TakeFound again = %+v, want none: each is returned once", got)
	}
	mustSim(t, sim.AddInstallation(7, "org-7", "org-7/repo-1"))
	if _, _, err := a.ForRepo(ctx, "org-7", "repo-1"); err != nil {
		t.Fatalf("ForRepo(org-7/repo-1): %v", err)
	}
	mustSim(t, sim.RemoveInstallation(7))
	mustSim(t, a.Relist(ctx))
	if got := a.TakeFound(); len(got) != 0 {
		t.Errorf("TakeFound after a list dropped installation 7 = %+v, want none: a dropped installation is not told installed", got)
	}
}
