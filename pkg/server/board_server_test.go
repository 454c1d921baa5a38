package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// startBoardCluster starts n replicas (newCluster, startReplicas: each its
// own forge token) syncing repos every minute into one board, on issues
// seeded by seed, inside a synctest bubble. Each replica's stop may be
// called more than once; stopAll stops every replica.
func startBoardCluster(t *testing.T, n int, noLease bool, seed func(*forgesim.Sim), repos ...string) (c *cluster, stopAll func()) {
	t.Helper()
	c, next := newCluster(t, 0)
	seed(c.sim)
	cards := board.NewMemoryStore()
	c.cmp.NoLease = noLease
	startReplicas(t, c, next, n, time.Minute, func(cfg *server.Config) {
		cfg.Board, cfg.BoardRepos, cfg.BoardInterval = cards, repos, time.Minute
	})
	for _, r := range c.replicas {
		r.stop = sync.OnceFunc(r.stop)
	}
	return c, func() {
		for _, r := range c.replicas {
			r.stop()
		}
	}
}

// issuesRoute is the simulator's route of the issues list, the board
// sync's only forge request.
const issuesRoute = "GET /repos/{owner}/{repo}/issues"

// boardListsBy is how many issue lists the simulator received from token.
func boardListsBy(sim *forgesim.Sim, token string) int64 {
	return sim.Requests(forgesim.Filter{Token: token, Route: issuesRoute})
}

// boardTerms are the owners elected for forge-board-sync, in order.
func boardTerms(c *cluster) []string {
	events, _ := c.tl.snapshot()
	var out []string
	for _, e := range events {
		if e.Kind == lease.Elected && e.Name == server.ForgeBoardSync().Name {
			out = append(out, e.Owner)
		}
	}
	return out
}

func seedIssues(t *testing.T, specs ...string) func(*forgesim.Sim) {
	return func(sim *forgesim.Sim) {
		for _, spec := range specs {
			repo, n, _ := strings.Cut(spec, "#")
			owner, name, _ := strings.Cut(repo, "/")
			num, _ := strconv.Atoi(n)
			if err := sim.SeedIssue(owner, name, forgesim.Issue{Number: num, Title: spec, State: "open"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestBoardSyncOnlyTheElectedReplicaSpendsTheBoardLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stopAll := startBoardCluster(t, 3, false, seedIssues(t, "acme/app#1", "acme/app#2", "acme/lib#1"), "acme/app", "acme/lib")
		defer stopAll()
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()

		terms := boardTerms(c)
		if len(terms) != 1 {
			t.Fatalf("board terms: got %v, want one: the lease is sticky", terms)
		}
		leader := terms[0]
		for _, r := range c.replicas {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/board", nil)
			req.Header.Set("Authorization", "Bearer a")
			r.handler.ServeHTTP(rec, req)
			want := "Synced by <code>" + leader + "</code> · "
			if r.owner == leader {
				want = "Synced by <code>" + leader + "</code> (this replica) · last complete pass <time"
			}
			if !strings.Contains(rec.Body.String(), want) {
				t.Errorf("%s: GET /board lacks %q, want it: the page says who syncs and, on the syncer, its last pass", r.owner, want)
			}
		}
		for _, r := range c.replicas {
			// Ten passes, the first one interval after the election, two
			// repositories each: one request a repository a pass.
			want := int64(0)
			if r.owner == leader {
				want = 20
			}
			if got := boardListsBy(c.sim, r.token); got != want {
				t.Errorf("%s: simulator counted %d issue lists, want %d: only the elected replica (%s) sends forge-board-sync requests", r.owner, got, want, leader)
			}
			if got := laneCount(r.forge, forge.LaneBoardSync, 0); got != boardListsBy(c.sim, r.token) {
				t.Errorf("%s: counted %d on lane %s, the simulator %d: the client's counts match the server's", r.owner, got, forge.LaneBoardSync, boardListsBy(c.sim, r.token))
			}
		}

		// The leader stops; a successor takes over within one retry and its
		// first pass, a full sync, is one interval after its election.
		for _, r := range c.replicas {
			if r.owner == leader {
				r.stop()
			}
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		terms = boardTerms(c)
		if len(terms) != 2 || terms[1] == leader {
			t.Fatalf("board terms after the leader stopped: got %v, want a second, another replica's", terms)
		}
		for _, r := range c.replicas {
			got := boardListsBy(c.sim, r.token)
			if r.owner != leader && r.owner != terms[1] && got != 0 {
				t.Errorf("%s: got %d issue lists, want 0: one elected replica at a time", r.owner, got)
			}
			if r.owner == terms[1] && got == 0 {
				t.Errorf("%s: got no issue lists, want its passes: the successor syncs", r.owner)
			}
		}
	})
}

// TestBoardSyncCostIsOneReplicasAtAnyReplicaCount measures the board lane
// side by side: with the lease, three replicas cost what one does; without
// it (--no-lease), three times as much.
func TestBoardSyncCostIsOneReplicasAtAnyReplicaCount(t *testing.T) {
	cost := func(n int, noLease bool) int64 {
		var got int64
		synctest.Test(t, func(t *testing.T) {
			c, stopAll := startBoardCluster(t, n, noLease, seedIssues(t, "acme/app#1"), "acme/app")
			time.Sleep(time.Hour + time.Second)
			synctest.Wait()
			stopAll()
			got = c.sim.Requests(forgesim.Filter{Route: issuesRoute})
		})
		return got
	}
	one, three, threeNoLease := cost(1, false), cost(3, false), cost(3, true)
	t.Logf("board-lane requests in one hour: N=1 %d, N=3 %d (ratio %.2f), N=3 --no-lease %d (ratio %.2f)",
		one, three, float64(three)/float64(one), threeNoLease, float64(threeNoLease)/float64(one))
	if one != 60 || three != one {
		t.Errorf("one hour at a 1m interval: got N=1 %d, N=3 %d requests, want 60 and 60: the board lane costs one replica's whatever the replica count", one, three)
	}
	if threeNoLease != 3*one {
		t.Errorf("N=3 without the lease: got %d, want %d: unelected, every replica pays", threeNoLease, 3*one)
	}
}

// TestBoardRoute pins the wiring of the board's view: GET /board serves
// board.Handler on the configured store, and without board repositories
// there is no board (404).
func TestBoardRoute(t *testing.T) {
	cards := board.NewMemoryStore()
	card := board.Card{Host: "github.com", Repo: "acme/app", Number: 1, Title: "crash", State: "open", Updated: time.Now()}
	if _, err := cards.Put(context.Background(), card); err != nil {
		t.Fatal(err)
	}
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	for _, tc := range []struct {
		repos    []string
		code     int
		contains string
		why      string
	}{
		{[]string{"acme/app"}, http.StatusOK, `"title":"crash"`, "the board's cards, from the configured store"},
		{nil, http.StatusNotFound, "not configured", "no repositories, no board"},
	} {
		srv, err := server.New(server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc,
			APIToken: "a", WebhookSecret: "w", Board: cards, BoardRepos: tc.repos})
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		rec := getBoard(srv, "/board?format=json")
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.contains) {
			t.Errorf("GET /board with repos %v: got %d %s, want %d containing %s: %s", tc.repos, rec.Code, rec.Body, tc.code, tc.contains, tc.why)
		}
	}
}

// getBoard serves GET path of srv, whose API token is "a".
func getBoard(srv *server.Server, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer a")
	srv.Handler().ServeHTTP(rec, req)
	return rec
}

// TestNewRejectsBadBoardConfigNamingTheField pins that New refuses a bad
// board configuration with ErrConfig naming the field, in token and App
// mode alike: App mode builds its board syncs later, per installation, so
// what a board sync would refuse must be refused at New, or that
// installation's board would never sync. A repository named twice, in any
// case (GitHub's names compare without case), would be two cards per issue.
func TestNewRejectsBadBoardConfigNamingTheField(t *testing.T) {
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	app, err := forge.NewApp(forge.AppConfig{BaseURL: "http://127.0.0.1:1/", AppID: appID, PrivateKey: forgetest.AppKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]func(*server.Config){
		"token": func(c *server.Config) { c.Forge = fc },
		"App":   func(c *server.Config) { c.App = app },
	}
	for mode, inMode := range modes {
		for _, c := range []struct {
			field string
			mod   func(*server.Config)
		}{
			{"BoardInterval", func(c *server.Config) { c.BoardInterval = -time.Second }},
			{"BoardFullEvery -1s", func(c *server.Config) { c.BoardFullEvery = -time.Second }},
			{`BoardRepos entry "nope"`, func(c *server.Config) { c.BoardRepos = []string{"nope"} }},
			{`BoardRepos entry "acme/app" names the repository of entry "acme/app"`, func(c *server.Config) { c.BoardRepos = []string{"acme/app", "acme/lib", "acme/app"} }},
			{`BoardRepos entry "Acme/App" names the repository of entry "acme/app"`, func(c *server.Config) { c.BoardRepos = []string{"acme/app", "Acme/App"} }},
		} {
			cfg := server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), APIToken: "a", WebhookSecret: "w", BoardRepos: []string{"acme/app"}}
			inMode(&cfg)
			c.mod(&cfg)
			if _, err := server.New(cfg); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("%s mode: New with a bad %s = %v, want ErrConfig naming it", mode, c.field, err)
			}
		}
	}
}

func TestForgeBoardSyncLease(t *testing.T) {
	l := server.ForgeBoardSync()
	if l.Name != forge.LaneBoardSync || l.TTL(5*time.Minute) != 15*time.Minute || l.Retry(5*time.Minute) != 5*time.Minute {
		t.Errorf("got %+v, want forge-board-sync, TTL 3 intervals, retry 1: the board's lease is named as its lane and shaped as the sweeper's", l)
	}
	found := false
	for _, x := range server.Leases() {
		found = found || x == l
	}
	if !found {
		t.Errorf("Leases() = %v lacks %+v: every elected net's lease is listed", server.Leases(), l)
	}
}

// unlistedLeases is a lease store whose Holders does not answer.
type unlistedLeases struct{ *lease.MemoryStore }

var errLeasesDown = errors.New("lease store down (injected)")

func (unlistedLeases) Holders(context.Context) ([]lease.Holder, error) { return nil, errLeasesDown }

// TestBoardPageNeverSaysNobodySyncsUnknowingly pins that GET /board says
// who syncs is not known when the lease store does not answer, rather
// than "nobody syncs now", which it does not know either.
func TestBoardPageNeverSaysNobodySyncsUnknowingly(t *testing.T) {
	leases := lease.NewMemoryStore()
	if ok, err := leases.Acquire(context.Background(), server.ForgeBoardSync().Name, "replica-b", time.Now(), time.Hour); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	srv, err := server.New(server.Config{Runs: gaterun.NewMemoryStore(), Leases: unlistedLeases{leases},
		Forge: newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil), APIToken: apiToken, WebhookSecret: "w",
		Board: board.NewMemoryStore(), BoardRepos: []string{"acme/app"}})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	code, line := boardSyncLine(srv.Handler())
	if code != http.StatusOK || strings.Contains(line, "nobody syncs") || !strings.Contains(line, "Who syncs is not known") {
		t.Errorf("GET /board with the lease store down: got %d, status line %q, want 200 saying who syncs is not known: replica-b holds the lease", code, line)
	}
}

// TestBoardPageNamesOnlyAnUnexpiredHolderOfTheBoardLease pins who GET
// /board says syncs under one lease: the owner of the board's lease while
// it is unexpired; neither a holder whose lease expired (a crashed
// replica) nor the holder of another net's lease.
func TestBoardPageNamesOnlyAnUnexpiredHolderOfTheBoardLease(t *testing.T) {
	for _, c := range []struct {
		name, lease, owner string
		from               time.Duration // the lease was taken this long ago, for an hour
		want, notWant      string
	}{
		{"held", server.ForgeBoardSync().Name, "replica-b", 0, "Synced by <code>replica-b</code>", "nobody syncs"},
		{"expired", server.ForgeBoardSync().Name, "replica-b", -2 * time.Hour, "nobody syncs now", "replica-b"},
		{"another net's", server.MergeGateSweeper().Name, "replica-c", 0, "nobody syncs now", "replica-c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			leases := lease.NewMemoryStore()
			if ok, err := leases.Acquire(context.Background(), c.lease, c.owner, time.Now().Add(c.from), time.Hour); !ok || err != nil {
				t.Fatalf("Acquire: %v, %v", ok, err)
			}
			srv, err := server.New(server.Config{Runs: gaterun.NewMemoryStore(), Leases: leases,
				Forge: newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil), APIToken: apiToken, WebhookSecret: "w",
				Board: board.NewMemoryStore(), BoardRepos: []string{"acme/app"}})
			if err != nil {
				t.Fatalf("server.New: %v", err)
			}
			code, line := boardSyncLine(srv.Handler())
			if code != http.StatusOK || !strings.Contains(line, c.want) || strings.Contains(line, c.notWant) {
				t.Errorf("GET /board with %s's lease %s held by %s: got %d, status line %q, want 200 with %q, without %q", c.name, c.lease, c.owner, code, line, c.want, c.notWant)
			}
		})
	}
}

// TestBoardPageLastPassIsOneThatSyncedEveryRepository pins the page's
// freshness: "last complete pass" moves only for a pass that synced every
// board repository, not for one that reached them all and failed one,
// whose cards of that repository may be stale.
func TestBoardPageLastPassIsOneThatSyncedEveryRepository(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stopAll := startBoardCluster(t, 1, false, seedIssues(t, "acme/app#1"), "acme/app", "acme/lib")
		defer stopAll()
		line := func() string {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/board", nil)
			req.Header.Set("Authorization", "Bearer a")
			c.replicas[0].handler.ServeHTTP(rec, req)
			_, l, _ := strings.Cut(rec.Body.String(), "Synced by")
			l, _, _ = strings.Cut(l, "\n")
			return l
		}
		time.Sleep(2*time.Minute + time.Second) // two passes, acme/lib not found in either
		synctest.Wait()
		if line := line(); !strings.Contains(line, "last complete pass: none yet") {
			t.Errorf("GET /board after passes that failed acme/lib: status line %q, want \"last complete pass: none yet\": a pass that failed a repository is not complete", line)
		}
		seedIssues(t, "acme/lib#1")(c.sim)
		time.Sleep(time.Minute)
		synctest.Wait()
		if line := line(); !strings.Contains(line, "last complete pass <time") {
			t.Errorf("GET /board after a pass that synced both repositories: status line %q, want its time", line)
		}
	})
}

// hangingLists never answers an issue list of path (until the request is
// cancelled), as a forge that hangs does, and passes everything else to
// next.
type hangingLists struct {
	next http.RoundTripper
	path string
}

func (h hangingLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != h.path {
		return h.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// TestAppModeBoardSyncWhoseListsHangIsCutAndStartedAfresh pins an App-mode
// installation's board watchdog: a pass whose forge hangs is cut at one
// interval and reported, and stallPasses such passes in a row end that
// installation's sync, which starts again afresh (its pass 1 again, a
// full sync) rather than hanging, or failing, for the rest of the term.
func TestAppModeBoardSyncWhoseListsHangIsCutAndStartedAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 1, false)
		seedIssues(t, "org-1/repo-1#5")(c.sim)
		passes := make(chan board.Pass, 100)
		startAppReplicas(t, c, hangingLists{next, "/repos/org-1/repo-1/issues"}, 1, time.Hour, 1, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval = board.NewMemoryStore(), []string{"org-1/repo-1"}, time.Minute
			cfg.OnBoardPass = func(p board.Pass) { passes <- p }
		})
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		c.stopAll()
		close(passes)
		var numbers []int
		firsts := 0 // passes numbered 1: a sync's start
		for p := range passes {
			numbers = append(numbers, p.Pass)
			if p.Pass == 1 {
				firsts++
			}
			if len(p.Repos) == 1 && p.Repos[0].Err == nil {
				t.Errorf("pass %+v: synced, want failed: its list hangs", p)
			}
		}
		if len(numbers) == 0 {
			t.Fatalf("no board pass in 15 intervals of a hanging forge, want each cut at one interval and reported")
		}
		if firsts < 2 || slices.Max(numbers) > 3 {
			t.Errorf("passes, numbered within each sync: %v, want the sync started afresh (its pass 1 again) after 3 failed passes", numbers)
		}
	})
}

// blindLists is a forge transport whose answers to GET path never come
// until release is closed: it ignores the request's cancellation, as a
// stuck read would.
type blindLists struct {
	next    http.RoundTripper
	path    string
	release chan struct{}
}

func (b blindLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != b.path {
		return b.next.RoundTrip(req)
	}
	<-b.release
	return nil, errors.New("blind list released")
}

// TestAppModeStuckBoardPassFailsHealthzNamingItsInstallation pins the
// name an App-mode board sync's stuck pass has on /healthz: that of its
// installation, "forge-board-sync installation <id>", as a sweep pass's
// is "merge-gate-sweeper installation <id>", so the operator knows which
// installation's sync ignores its cancellation.
func TestAppModeStuckBoardPassFailsHealthzNamingItsInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		seedIssues(t, "org-1/repo-1#5", "org-2/repo-1#5")(c.sim)
		blind := blindLists{next, "/repos/org-2/repo-1/issues", make(chan struct{})}
		startAppReplicas(t, c, blind, 1, time.Hour, 1, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval = board.NewMemoryStore(), []string{"org-1/repo-1", "org-2/repo-1"}, time.Minute
		})
		r := c.replicas[0]
		defer r.stop()
		defer close(blind.release)  // first: the stuck pass returns, then the replica stops
		time.Sleep(5 * time.Minute) // the first pass at 1m, its deadline at 2m, the bound (TTL/6) 30 s past it
		synctest.Wait()
		code, body := healthzOf(r)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `forge-board-sync installation 2`) {
			t.Errorf("/healthz with installation 2's board pass stuck: got %d %s, want 503 naming \"forge-board-sync installation 2\"", code, body)
		}
		if strings.Contains(body, "installation 1") {
			t.Errorf("/healthz %s: names installation 1, whose board passes return", body)
		}
	})
}

// boardSyncLine is h's answer to GET /board: its status and the page's
// line that says who syncs ("" when there is none).
func boardSyncLine(h http.Handler) (code int, line string) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/board", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	h.ServeHTTP(rec, req)
	for l := range strings.Lines(rec.Body.String()) {
		if strings.Contains(l, "last complete pass") {
			line = l
		}
	}
	return rec.Code, line
}

// boardMode runs the board net of one replica in token or App mode.
type boardMode struct {
	name string
	// repos are the board's repositories, each with its fifth issue seeded; in App
	// mode each is an installation's.
	repos []string
	// start seeds the issues and starts the replica, its config as mod
	// sets it.
	start func(t *testing.T, mod func(*server.Config)) *cluster
}

// boardModes are the board net's two shapes: one sync under one lease,
// and in App mode one sync per installation under the group's shards.
var boardModes = []boardMode{
	{"token", []string{"acme/app", "acme/lib"}, func(t *testing.T, mod func(*server.Config)) *cluster {
		c, next := newCluster(t, 0)
		seedIssues(t, "acme/app#5", "acme/lib#5")(c.sim)
		startReplicas(t, c, next, 1, time.Hour, mod)
		return c
	}},
	{"App", []string{"org-1/repo-1", "org-2/repo-1"}, func(t *testing.T, mod func(*server.Config)) *cluster {
		c, next := newAppCluster(t, 2, false)
		seedIssues(t, "org-1/repo-1#5", "org-2/repo-1#5")(c.sim) // newAppCluster opens pull request 1 in each
		startAppReplicas(t, c, next, 1, time.Hour, 1, mod)
		return c
	}},
}

// TestBoardFullEveryReachesEverySync pins Config.BoardFullEvery's wiring
// in token and App mode alike: the board sync, under one lease or one per
// installation, lists a repository in full again once BoardFullEvery has
// passed since its last full sync, not board.DefaultFullEvery (a day).
func TestBoardFullEveryReachesEverySync(t *testing.T) {
	for _, mode := range boardModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				passes := make(chan board.Pass, 100)
				c := mode.start(t, func(cfg *server.Config) {
					cfg.Board, cfg.BoardRepos, cfg.BoardInterval = board.NewMemoryStore(), mode.repos, time.Minute
					cfg.BoardFullEvery = 3 * time.Minute
					cfg.OnBoardPass = func(p board.Pass) { passes <- p }
				})
				time.Sleep(8*time.Minute + time.Second)
				synctest.Wait()
				c.stopAll()
				close(passes)
				fulls := map[string][]int{}
				for p := range passes {
					for _, rp := range p.Repos {
						if p.Term == 1 && rp.Err == nil && rp.Since.IsZero() {
							fulls[rp.Repo] = append(fulls[rp.Repo], p.Pass)
						}
					}
				}
				for _, repo := range mode.repos {
					if got, want := fulls[repo], []int{1, 4, 7}; !slices.Equal(got[:min(3, len(got))], want) {
						t.Errorf("full syncs of %s: passes %v, want %v first: BoardFullEvery (three intervals) is the sync's full-sync period", repo, got, want)
					}
				}
			})
		})
	}
}

// prunesWatched is a board.MemoryStore that records the repositories of
// each Prune it did: not of one it refused (a done context's, a pass cut
// by its term's end), which scanned no card and is tried again.
type prunesWatched struct {
	*board.MemoryStore
	mu     sync.Mutex
	prunes [][]string
}

func (s *prunesWatched) Prune(ctx context.Context, host string, repos []string) (int, error) {
	removed, err := s.MemoryStore.Prune(ctx, host, repos)
	if err == nil {
		s.mu.Lock()
		s.prunes = append(s.prunes, slices.Sorted(slices.Values(repos)))
		s.mu.Unlock()
	}
	return removed, err
}

// TestBoardRemovesTheCardsOfARepositoryDropped pins that a repository
// dropped from BoardRepos takes its cards off the board at the sync's
// first pass, in token and App mode alike, and that in App mode, where
// each installation's sync has a share of the board's repositories, each
// keeps every board repository's cards: it prunes with BoardRepos whole.
func TestBoardRemovesTheCardsOfARepositoryDropped(t *testing.T) {
	for _, mode := range boardModes {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cards := &prunesWatched{MemoryStore: board.NewMemoryStore()}
				dropped := board.Card{Host: "github.com", Repo: "acme/dropped", Number: 1, Title: "of a repository dropped", State: "open", Updated: time.Now()}
				if _, err := cards.Put(context.Background(), dropped); err != nil {
					t.Fatal(err)
				}
				c := mode.start(t, func(cfg *server.Config) {
					cfg.Board, cfg.BoardRepos, cfg.BoardInterval, cfg.APIToken = cards, mode.repos, time.Minute, apiToken
				})
				time.Sleep(3*time.Minute + time.Second)
				synctest.Wait()
				defer c.stopAll()
				if hasCard(t, cards, dropped.Repo, 1) {
					t.Errorf("card of %s: still on the board, want removed: a repository dropped from BoardRepos takes its cards with it", dropped.Repo)
				}
				for _, repo := range mode.repos {
					if !hasCard(t, cards, repo, 5) {
						t.Errorf("card of %s: gone, want kept: no sync removes the cards of a repository on the board", repo)
					}
				}
				cards.mu.Lock()
				for _, repos := range cards.prunes {
					if !slices.Equal(repos, mode.repos) {
						t.Errorf("Prune of the cards off the board with %v, want %v: a sync with a share of the board keeps every board repository's cards", repos, mode.repos)
					}
				}
				if len(cards.prunes) == 0 {
					t.Errorf("no Prune, want one a sync")
				}
				cards.mu.Unlock()
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/board?format=json", nil)
				req.Header.Set("Authorization", "Bearer "+apiToken)
				c.replicas[0].handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), dropped.Repo) {
					t.Errorf("GET /board: %d %s, want 200 without a card of %s", rec.Code, rec.Body, dropped.Repo)
				}
			})
		})
	}
}

// TestAppModeBoardPrunesTheHostOncePerPeriod pins that in App mode, where
// each installation's sync has a share of the board, the cards of
// repositories off the board are pruned once a replica's
// BoardFullEvery, whichever sync passes first, not once per installation
// and term (each prune a scan of the card collection): three
// installations' syncs make one prune at their first passes, an
// installation that comes after adds none within the period, and the next
// period's prune still takes the cards of a repository off the board put
// back since (as a replica still configured with it would).
func TestAppModeBoardPrunesTheHostOncePerPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 3, false)
		seedIssues(t, "org-1/repo-1#5", "org-2/repo-1#5", "org-3/repo-1#5", "org-4/repo-1#5")(c.sim)
		cards := &prunesWatched{MemoryStore: board.NewMemoryStore()}
		dropped := func(n int) board.Card {
			return board.Card{Host: "github.com", Repo: "acme/dropped", Number: n, Title: "of a repository dropped", State: "open", Updated: time.Now()}
		}
		if _, err := cards.Put(ctx, dropped(1)); err != nil {
			t.Fatal(err)
		}
		repos := []string{"org-1/repo-1", "org-2/repo-1", "org-3/repo-1", "org-4/repo-1"} // org-4's installation comes later
		startAppReplicas(t, c, next, 1, time.Hour, 4, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval, cfg.BoardFullEvery = cards, repos, time.Minute, 5*time.Minute
		})
		r := c.replicas[0]
		defer r.stop()
		prunes := func() int {
			cards.mu.Lock()
			defer cards.mu.Unlock()
			return len(cards.prunes)
		}
		time.Sleep(2*time.Minute + 30*time.Second) // the group's terms begin, then the syncs' first passes
		synctest.Wait()
		if got := prunes(); got != 1 {
			t.Errorf("prunes after the first passes of 3 installations' syncs: %d, want 1: the host is pruned once, not once per installation", got)
		}
		if hasCard(t, cards, "acme/dropped", 1) {
			t.Errorf("card of acme/dropped after the first passes: kept, want removed: a repository off the board takes its cards with it")
		}
		if err := c.sim.AddInstallation(4, "org-4", "org-4/repo-1"); err != nil {
			t.Fatal(err)
		}
		if err := r.app.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.Put(ctx, dropped(2)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute) // installation 4's sync starts and passes; the period has not passed
		synctest.Wait()
		if !hasCard(t, cards, "org-4/repo-1", 5) {
			t.Fatalf("installation 4's board repository has no card three intervals after it came: its sync did not pass")
		}
		if got := prunes(); got != 1 {
			t.Errorf("prunes after installation 4's sync's first pass: %d, want 1: a sync that comes within the period does not prune again", got)
		}
		time.Sleep(2 * time.Minute) // the second period's first pass
		synctest.Wait()
		if got := prunes(); got != 2 {
			t.Errorf("prunes once BoardFullEvery passed: %d, want 2: one a period", got)
		}
		if hasCard(t, cards, "acme/dropped", 2) {
			t.Errorf("card of acme/dropped put back after the first prune: kept, want removed by the next period's")
		}
		for _, repo := range repos {
			if !hasCard(t, cards, repo, 5) {
				t.Errorf("card of %s: gone, want kept: no prune removes a board repository's cards", repo)
			}
		}
	})
}

// TestAppModeBoardPrunesTheHostOncePerPeriodAcrossReplicas pins that in
// App mode the replicas holding board shards prune the host once a
// BoardFullEvery between them, not once each (each prune a scan of the
// card collection): each replica's board.Pruner claims the period in the
// shared store first, and only one claim a period is granted. The first
// passes come at 2 minutes, while the group rebalances its shards; a
// claim or prune a term's end cuts is tried again at the next pass (a
// minute later), so the first period begins between 2 and 4 minutes, the
// second 5 minutes after it, and no third within 9m30s.
func TestAppModeBoardPrunesTheHostOncePerPeriodAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const replicas, installations = 3, 6
		c, next := newAppCluster(t, installations, false)
		var repos, specs []string
		for i := 1; i <= installations; i++ {
			repos = append(repos, fmt.Sprintf("org-%d/repo-1", i))
			specs = append(specs, fmt.Sprintf("org-%d/repo-1#5", i))
		}
		seedIssues(t, specs...)(c.sim)
		cards := &prunesWatched{MemoryStore: board.NewMemoryStore()}
		startAppReplicas(t, c, next, replicas, time.Hour, installations, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval, cfg.BoardFullEvery = cards, repos, time.Minute, 5*time.Minute
		})
		defer c.stopAll()
		time.Sleep(9*time.Minute + 30*time.Second) // the terms begin, the syncs' first passes, then a period's
		synctest.Wait()
		syncers := map[string]bool{}
		for _, r := range c.replicas {
			if hasBoardShard(t, c, r.owner) {
				syncers[r.owner] = true
			}
		}
		if len(syncers) < 2 {
			t.Fatalf("replicas holding board shards: %v, want at least 2: the rule is about several", syncers)
		}
		cards.mu.Lock()
		got := len(cards.prunes)
		cards.mu.Unlock()
		if got != 2 {
			t.Errorf("prunes in two periods by %d replicas holding board shards: %d, want 2: the deployment prunes the host once a period, not once per replica", len(syncers), got)
		}
		for _, repo := range repos {
			if !hasCard(t, cards, repo, 5) {
				t.Errorf("card of %s: missing, want synced", repo)
			}
		}
	})
}

// hasBoardShard reports whether owner holds a shard lease of the board
// group.
func hasBoardShard(t *testing.T, c *cluster, owner string) bool {
	t.Helper()
	hs, err := c.leases.Holders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if strings.HasPrefix(h.Name, server.ForgeBoardSync().Name) && h.Owner == owner && time.Now().Before(h.Expires) {
			return true
		}
	}
	return false
}
