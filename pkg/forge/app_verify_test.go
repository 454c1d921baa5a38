package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// TestInstallationGoneAndCoversAskGitHubOnLaneApp pins the checks the
// server makes before it forgets what an installation webhook says is
// gone: each asks GitHub with the App's JWT, charged to lane app, and
// reads 404 as gone or not covered; an answer it could not get is an
// error, never a "gone".
func TestInstallationGoneAndCoversAskGitHubOnLaneApp(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(3, 1))
	mustSim(t, sim.RemoveInstallation(3))
	a := newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	gone := []struct {
		id   int64
		want bool
		rule string
	}{
		{2, false, "an installation GitHub answers, not suspended, is not gone"},
		{3, true, "a removed installation (404) is gone"},
		{9, true, "an id GitHub does not know (404) is gone"},
	}
	for _, tc := range gone {
		if got, err := a.InstallationGone(ctx, tc.id); err != nil || got != tc.want {
			t.Errorf("InstallationGone(%d) = %v, %v; want %v: %s", tc.id, got, err, tc.want, tc.rule)
		}
	}
	covers := []struct {
		id   int64
		repo string
		want bool
		rule string
	}{
		{1, "org-1/repo-1", true, "the installation covering the repository covers it"},
		{2, "org-1/repo-1", false, "another installation's repository is not covered"},
		{3, "org-3/repo-1", false, "a repository no installation covers (404) is not covered"},
		{1, "repo-1", false, "a name without an owner is covered by none"},
	}
	for _, tc := range covers {
		if got, err := a.Covers(ctx, tc.id, tc.repo); err != nil || got != tc.want {
			t.Errorf("Covers(%d, %s) = %v, %v; want %v: %s", tc.id, tc.repo, got, err, tc.want, tc.rule)
		}
	}
	if n := appCount(a, forge.LaneApp, -1, 0); n != 6 {
		t.Errorf("requests on lane app: %d, want 6: one a check, the name without an owner none", n)
	}
}

// TestInstallationGoneReadsSuspensionAndNeverAnErrorAsGone pins, on
// hand-written answers, that an installation whose suspended_at is set is
// gone (TestASuspendedInstallationIsNotServed checks it on the
// simulator's), and that a 500, which the simulator does not model, is an
// error, not gone.
func TestInstallationGoneReadsSuspensionAndNeverAnErrorAsGone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/app/installations/5":
			w.Write([]byte(`{"id":5,"account":{"login":"org-5"},"suspended_at":"2026-01-02T03:04:05Z"}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"Server Error"}`))
		}
	}))
	t.Cleanup(srv.Close)
	a := newApp(t, srv, forge.AppConfig{})
	if got, err := a.InstallationGone(context.Background(), 5); err != nil || !got {
		t.Errorf("InstallationGone of a suspended installation = %v, %v; want gone: suspended_at set is suspended", got, err)
	}
	if got, err := a.InstallationGone(context.Background(), 6); err == nil || got {
		t.Errorf("InstallationGone answered 500 = %v, %v; want an error and not gone: no answer is never gone", got, err)
	}
	if got, err := a.Covers(context.Background(), 6, "org-6/repo-1"); err == nil || got {
		t.Errorf("Covers answered 500 = %v, %v; want an error: no answer is no answer", got, err)
	}
}

// TestASuspendedInstallationIsNotServed pins App mode's reading of a
// suspension: GitHub still lists a suspended installation and answers it
// with suspended_at set, but refuses to mint its tokens
// (https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app).
// So a list leaves it out of the known set (dropping it when known),
// ForRepo of its repository is ErrNotInstalled and knows it no more,
// InstallationGone says gone; once unsuspended, a list and ForRepo serve it
// again. Each step is checked on the simulator's answers.
func TestASuspendedInstallationIsNotServed(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(3, 1))
	a := newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	known := func() string { return fmt.Sprint(a.Installations()) }
	mustSim(t, a.Relist(ctx))
	mustSim(t, sim.SuspendInstallation(2))
	steps := []struct {
		do    func() error
		known string
		rule  string
	}{
		{func() error { return a.Relist(ctx) }, "[{1 org-1} {3 org-3}]", "a list drops the suspended installation it knew"},
		{func() error {
			if _, _, err := a.ForRepo(ctx, "org-2", "repo-1"); !errors.Is(err, forge.ErrSuspended) || !errors.Is(err, forge.ErrNotInstalled) {
				return fmt.Errorf("ForRepo of a suspended installation's repository = %v, want ErrSuspended, which is ErrNotInstalled", err)
			}
			if gone, err := a.InstallationGone(ctx, 2); err != nil || !gone {
				return fmt.Errorf("InstallationGone(2) = %v, %v, want gone: suspended_at is set", gone, err)
			}
			return nil
		}, "[{1 org-1} {3 org-3}]", "ForRepo does not serve a suspended installation, nor know it"},
		{func() error { return sim.UnsuspendInstallation(2) }, "[{1 org-1} {3 org-3}]", "an unsuspension is not known before GitHub says so"},
		{func() error {
			if _, id, err := a.ForRepo(ctx, "org-2", "repo-1"); err != nil || id != 2 {
				return fmt.Errorf("ForRepo after unsuspend = %d, %v, want 2", id, err)
			}
			return nil
		}, "[{1 org-1} {2 org-2} {3 org-3}]", "ForRepo serves the unsuspended installation"},
		{func() error { return a.Relist(ctx) }, "[{1 org-1} {2 org-2} {3 org-3}]", "a list keeps it"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.rule, err)
		}
		if got := known(); got != st.known {
			t.Fatalf("known set %s, want %s: %s", got, st.known, st.rule)
		}
	}
}

// TestCoveredListsTheInstallationsRepositoriesOnceForMany pins the cost
// of checking a large removal: up to CoverChecks repositories are asked
// about one by one with the App's JWT; more are checked against one list
// of the installation's repositories, a page per 100 it covers, whatever
// the number named (TestCoveredListsTheRepositoriesOfAnInstallationNotKnownYet
// pins the same for an installation not known yet). Each way answers the
// same: the names the installation still covers, in the order given.
func TestCoveredListsTheInstallationsRepositoriesOnceForMany(t *testing.T) {
	const listReposRoute = "GET /installation/repositories"
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(2, 250))
	var gone, named []string
	for i := 1; i <= 40; i++ {
		gone = append(gone, fmt.Sprintf("org-1/repo-%d", i))
	}
	mustSim(t, sim.RemoveInstallationRepos(1, gone...))
	named = append(named, gone...)
	named = append(named, "ORG-1/Repo-41", "org-1/repo-250", "org-2/repo-1", "repo-1")
	want := []string{"ORG-1/Repo-41", "org-1/repo-250"}
	cases := []struct {
		name          string
		relist        bool
		repos         []string
		want          []string
		lists, checks int64
		rule          string
	}{
		{"many", true, named, want, 3, 0,
			"44 names are checked against the 210 repositories the installation covers: 3 pages, no check each"},
		{"a few", true, []string{"org-1/repo-1", "org-1/repo-41", "org-2/repo-1"}, []string{"org-1/repo-41"}, 0, 3,
			"up to CoverChecks names are asked about one by one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newApp(t, srv, forge.AppConfig{})
			if tc.relist {
				if err := a.Relist(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			lists, checks := sim.Requests(forgesim.Filter{Route: listReposRoute}), sim.Requests(forgesim.Filter{Route: repoInstRoute})
			got, err := a.Covered(forge.WithLane(context.Background(), forge.LaneWebhook), 1, tc.repos)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Covered(1, %d names) = %v, %v; want %v: %s", len(tc.repos), got, err, tc.want, tc.rule)
			}
			lists, checks = sim.Requests(forgesim.Filter{Route: listReposRoute})-lists, sim.Requests(forgesim.Filter{Route: repoInstRoute})-checks
			if lists != tc.lists || checks != tc.checks {
				t.Errorf("pages listed %d, repositories checked %d; want %d and %d: %s", lists, checks, tc.lists, tc.checks, tc.rule)
			}
		})
	}
}

// TestSuspendedSaysWhatGitHubLastSaid pins AppClient.Suspended, what the
// installations view shows of the installations the App does not serve:
// each answer of GitHub that says an installation is suspended (a list,
// a suspend webhook, a check) lists it, with GitHub's suspended_at when
// the answer has one, and it is listed until GitHub says otherwise or it
// is served again; it asks GitHub nothing of its own.
func TestSuspendedSaysWhatGitHubLastSaid(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(3, 1))
	a := newApp(t, srv, forge.AppConfig{})
	ctx := context.Background()
	mustSim(t, sim.SuspendInstallation(2))
	at := sim.Now().Truncate(time.Second).UTC()
	payloadAt := at.Add(-time.Hour)
	event := func(action string, id int64, suspendedAt *github.Timestamp) *github.InstallationEvent {
		return &github.InstallationEvent{Action: github.Ptr(action), Installation: &github.Installation{
			ID: github.Ptr(id), Account: &github.User{Login: github.Ptr(fmt.Sprintf("org-%d", id))}, SuspendedAt: suspendedAt}}
	}
	suspendedList := func() string {
		var out []string
		for _, s := range a.Suspended() {
			out = append(out, fmt.Sprintf("%d %s %s", s.ID, s.Account, s.At.UTC().Format(time.RFC3339)))
		}
		return fmt.Sprint(out)
	}
	atS, payloadS := at.Format(time.RFC3339), payloadAt.Format(time.RFC3339)
	steps := []struct {
		do   func() error
		want string
		rule string
	}{
		{func() error { return a.Relist(ctx) }, "[2 org-2 " + atS + "]",
			"a list's suspended installation is listed, with its suspended_at"},
		{func() error { a.HandleInstallationEvent(event("unsuspend", 2, nil)); return nil }, "[]",
			"an unsuspend webhook serves it again: not suspended"},
		{func() error {
			a.HandleInstallationEvent(event("suspend", 3, &github.Timestamp{Time: payloadAt}))
			return nil
		}, "[3 org-3 " + payloadS + "]", "a suspend webhook lists it, with the payload's suspended_at"},
		{func() error { a.HandleInstallationEvent(event("deleted", 3, nil)); return nil }, "[]",
			"a deleted installation is not suspended: it is gone"},
		{func() error {
			if gone, err := a.InstallationGone(ctx, 2); err != nil || !gone {
				return fmt.Errorf("InstallationGone(2) = %v, %v, want gone: suspended_at is set", gone, err)
			}
			return nil
		}, "[]", "a check that finds a known installation suspended lists it only once it is not served"},
		{func() error {
			ch := a.DropChecked(2)
			if !ch.SuspendedAt.Equal(at) {
				return fmt.Errorf("DropChecked(2) suspended at %v, want %v, GitHub's: the other replicas list it suspended since then too", ch.SuspendedAt, at)
			}
			if ch.SuspendedAt = (time.Time{}); ch != (forge.InstallationChange{ID: 2, Gone: true, Suspended: true, Account: "org-2"}) {
				return fmt.Errorf("DropChecked(2) = %+v, want a suspension of 2 on org-2: the other replicas list it suspended too", ch)
			}
			return nil
		}, "[2 org-2 " + atS + "]",
			"once dropped (DropChecked, after a refused mint or read), the installation the check found suspended is listed"},
		{func() error {
			a.HandleInstallationEvent(event("suspend", 2, nil))
			return nil
		}, "[2 org-2 " + atS + "]", "a payload without suspended_at keeps the time known"},
		{func() error {
			mustSim(t, sim.UnsuspendInstallation(2))
			return a.Relist(ctx)
		}, "[]", "a list that has it unsuspended lists it no more"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.rule, err)
		}
		if got := suspendedList(); got != st.want {
			t.Fatalf("Suspended() = %s, want %s: %s", got, st.want, st.rule)
		}
	}
}

// TestCoveredListsTheRepositoriesOfAnInstallationNotKnownYet pins Covered
// for an installation this AppClient has not listed yet (an
// installation_repositories event can reach a replica before its re-list
// does): whenever GitHub mints the installation a token, its repositories
// are listed once, a page per 100, as for a known one, rather than asked
// about one request each; the token is stored, so the installation's own
// Client, once known, mints none. Only when GitHub refuses the mint (a
// suspended installation: 403) is each name asked about. Either way the
// answer is the names the installation covers, in the order given.
func TestCoveredListsTheRepositoriesOfAnInstallationNotKnownYet(t *testing.T) {
	const listReposRoute = "GET /installation/repositories"
	named := []string{"org-1/repo-1", "ORG-1/Repo-2", "org-1/repo-3", "org-1/repo-999", "org-2/repo-1", "repo-1"}
	cases := []struct {
		name                 string
		suspend              bool
		want                 []string
		lists, mints, checks int64
		rule                 string
	}{
		{"mintable", false, []string{"org-1/repo-1", "ORG-1/Repo-2", "org-1/repo-3"}, 3, 1, 0,
			"an installation GitHub mints a token for has its 250 repositories listed: 3 pages, no check each"},
		{"mint refused", true, []string{"org-1/repo-1", "ORG-1/Repo-2", "org-1/repo-3"}, 0, 1, int64(len(named)) - 1,
			"an installation GitHub refuses a token has each name asked about, the one without an owner excepted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := startSim(t)
			mustSim(t, sim.SeedInstallations(2, 250))
			if tc.suspend {
				mustSim(t, sim.SuspendInstallation(1))
			}
			a := newApp(t, srv, forge.AppConfig{})
			count := func() (lists, mints, checks int64) {
				return sim.Requests(forgesim.Filter{Route: listReposRoute}), sim.Requests(forgesim.Filter{Route: "POST /app/installations/{id}/access_tokens"}),
					sim.Requests(forgesim.Filter{Route: repoInstRoute})
			}
			got, err := a.Covered(forge.WithLane(context.Background(), forge.LaneWebhook), 1, named)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Covered(1, %d names) = %v, %v; want %v: %s", len(named), got, err, tc.want, tc.rule)
			}
			lists, mints, checks := count()
			if lists != tc.lists || mints != tc.mints || checks != tc.checks {
				t.Errorf("pages listed %d, mints %d, repositories checked %d; want %d, %d and %d: %s", lists, mints, checks, tc.lists, tc.mints, tc.checks, tc.rule)
			}
			if len(a.Installations()) != 0 {
				t.Errorf("known installations after Covered: %v, want none: a check does not add the installation", a.Installations())
			}
			if tc.suspend {
				return
			}
			mustSim(t, a.Relist(context.Background()))
			if err := a.Mint(context.Background(), 1); err != nil {
				t.Fatalf("Mint(1) once known: %v", err)
			}
			if _, m, _ := count(); m != mints {
				t.Errorf("mints once installation 1 is known: %d, want %d: the token minted for the check is stored and served", m, mints)
			}
		})
	}
}

// TestAListForgetsASuspendedInstallationGitHubNoLongerHas pins that a
// list's suspended installations are what Suspended says from then on:
// one suspended, then deleted without a webhook reaching the replica, is
// no longer listed suspended once the next list leaves it out.
func TestAListForgetsASuspendedInstallationGitHubNoLongerHas(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(2, 0))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, sim.SuspendInstallation(1))
	mustSim(t, a.Relist(context.Background()))
	if got := a.Suspended(); len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("Suspended after a list with installation 1 suspended = %+v, want installation 1", got)
	}
	mustSim(t, sim.RemoveInstallation(1))
	mustSim(t, a.Relist(context.Background()))
	if got := a.Suspended(); len(got) != 0 {
		t.Errorf("Suspended after a list without installation 1 = %+v, want none: GitHub no longer has it", got)
	}
}

// TestCoveredAsksEachNameOfAnInstallationGitHubDoesNotHave pins Covered's
// answer for an installation whose token mint GitHub answers 404 (deleted,
// or never the App's): more than CoverChecks names are asked about one by
// one, as for a mint refused 403, and the answer is that it covers none,
// not an error (which a webhook would answer 503 for ever).
func TestCoveredAsksEachNameOfAnInstallationGitHubDoesNotHave(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(2, 5))
	a := newApp(t, srv, forge.AppConfig{})
	named := []string{"org-1/repo-1", "org-1/repo-2", "org-2/repo-1", "org-2/repo-2"}
	got, err := a.Covered(context.Background(), 3, named)
	if err != nil || len(got) != 0 {
		t.Errorf("Covered(3, %d names) = %v, %v; want none covered and no error: GitHub has no installation 3", len(named), got, err)
	}
	if n := sim.Requests(forgesim.Filter{Route: repoInstRoute}); n != int64(len(named)) {
		t.Errorf("repositories checked: %d, want %d: each name is asked about once the mint is 404", n, len(named))
	}
}

// TestACheckThatFindsASuspensionLiftedEndsItsListing pins InstallationGone's
// other answer: an installation listed suspended that GitHub answers not
// suspended (unsuspended without a webhook reaching the replica) is no
// longer listed by Suspended.
func TestACheckThatFindsASuspensionLiftedEndsItsListing(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.SeedInstallations(2, 0))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, sim.SuspendInstallation(1))
	mustSim(t, a.Relist(context.Background()))
	mustSim(t, sim.UnsuspendInstallation(1))
	gone, err := a.InstallationGone(context.Background(), 1)
	if err != nil || gone {
		t.Fatalf("InstallationGone(1) after the unsuspension = %v, %v; want false", gone, err)
	}
	if got := a.Suspended(); len(got) != 0 {
		t.Errorf("Suspended after GitHub said installation 1 is not suspended = %+v, want none", got)
	}
}

// TestAChangeWithoutAnAccountKeepsTheKnownOne pins Apply's "its account,
// when said, updated": news without the account (a webhook whose payload
// had none) leaves the account the installation is known by.
func TestAChangeWithoutAnAccountKeepsTheKnownOne(t *testing.T) {
	sim, srv := startSim(t)
	mustSim(t, sim.AddInstallation(1, "acme"))
	a := newApp(t, srv, forge.AppConfig{})
	mustSim(t, a.Relist(context.Background()))
	a.Apply(forge.InstallationChange{ID: 1, Repositories: true})
	if got := a.Installations(); len(got) != 1 || got[0].Account != "acme" {
		t.Errorf("installations after a change naming no account = %+v, want installation 1 on acme", got)
	}
}
