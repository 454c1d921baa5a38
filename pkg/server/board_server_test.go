package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// boardReplica is one Server of an in-process cluster, with its own forge
// client so its board-lane requests can be told apart.
type boardReplica struct {
	owner string
	forge *forge.Client
	stop  func()
}

// startBoardCluster starts n Servers syncing repos on sim through tr, sharing
// one lease store (or none with noLease), inside a synctest bubble. elected
// receives the owner of every forge-board-sync term that starts.
func startBoardCluster(t *testing.T, n int, noLease bool, tr http.RoundTripper, elected chan<- string, repos ...string) []*boardReplica {
	t.Helper()
	leases := lease.NewMemoryStore()
	board := server.NewMemoryBoardStore()
	var out []*boardReplica
	for i := range n {
		r := &boardReplica{owner: fmt.Sprintf("replica-%d", i)}
		r.forge = newForge(t, "http://forge.test/", tr, "installation", nil, nil)
		srv, err := server.New(server.Config{
			Runs: server.NewMemoryRunStore(), Leases: leases, Forge: r.forge, APIToken: "a", WebhookSecret: "w",
			Owner: r.owner, Board: board, BoardRepos: repos, BoardInterval: time.Minute, NoLease: noLease,
			OnLeaseEvent: func(e lease.Event) {
				if e.Kind == lease.Elected && e.Name == server.ForgeBoardSync().Name {
					elected <- e.Owner
				}
			},
		})
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := srv.Run(ctx, nil); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		r.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
		out = append(out, r)
	}
	return out
}

func TestBoardSyncOnlyTheElectedReplicaSpendsTheBoardLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := forgesim.New()
		for n := 1; n <= 3; n++ {
			if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "i", State: "open"}); err != nil {
				t.Fatal(err)
			}
		}
		tr, stopSim := serveSimOnPipe(sim)
		defer stopSim()
		elected := make(chan string, 10)
		replicas := startBoardCluster(t, 3, false, tr, elected, "acme/app", "acme/lib")
		defer func() {
			for _, r := range replicas {
				r.stop()
			}
		}()
		if err := sim.SeedIssue("acme", "lib", forgesim.Issue{Number: 1, Title: "l", State: "open"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()

		leader := <-elected
		if len(elected) != 0 {
			t.Fatalf("terms started: got %d more after %s, want one: the lease is sticky", len(elected), leader)
		}
		byOwner := map[string]int64{}
		var sum int64
		for _, r := range replicas {
			byOwner[r.owner] = laneCount(r.forge, forge.LaneBoardSync, 0)
			sum += byOwner[r.owner]
		}
		simCount := sim.Requests(forgesim.Filter{Route: issuesRoute})
		// Ten passes, the first one interval after the election, two
		// repositories each: one request a repository a pass.
		if byOwner[leader] != 20 || sum != byOwner[leader] || simCount != sum {
			t.Fatalf("board-lane requests by replica: got %v (simulator: %d), want 20 from %s alone: only the elected replica sends forge-board-sync requests", byOwner, simCount, leader)
		}

		// The leader stops; a successor takes over within one retry and its
		// first pass, a full sync, is one interval after its election.
		var next *boardReplica
		for _, r := range replicas {
			if r.owner == leader {
				r.stop()
			} else if next == nil {
				next = r
			}
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		successor := <-elected
		if successor == leader {
			t.Fatalf("successor: got %s, want another replica after the leader stopped", successor)
		}
		sending := 0
		for _, r := range replicas {
			if r.owner != leader && laneCount(r.forge, forge.LaneBoardSync, 0) > 0 {
				sending++
			}
		}
		if sending != 1 {
			t.Fatalf("replicas other than the stopped leader sending board-lane requests: got %d, want 1: one elected replica at a time", sending)
		}
	})
}

// TestBoardSyncCostIsOneReplicasAtAnyReplicaCount measures the board lane
// side by side: with the lease, three replicas cost what one does; without
// it (--no-lease, as before ADR-117), three times as much.
func TestBoardSyncCostIsOneReplicasAtAnyReplicaCount(t *testing.T) {
	cost := func(n int, noLease bool) int64 {
		var got int64
		synctest.Test(t, func(t *testing.T) {
			sim := forgesim.New()
			if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "i", State: "open"}); err != nil {
				t.Fatal(err)
			}
			tr, stopSim := serveSimOnPipe(sim)
			defer stopSim()
			replicas := startBoardCluster(t, n, noLease, tr, make(chan string, 10), "acme/app")
			time.Sleep(time.Hour + time.Second)
			synctest.Wait()
			for _, r := range replicas {
				r.stop()
			}
			got = sim.Requests(forgesim.Filter{Route: issuesRoute})
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

func TestBoardPage(t *testing.T) {
	board := server.NewMemoryBoardStore()
	updated := time.Date(2026, 9, 30, 14, 0, 0, 0, time.UTC)
	for _, c := range []server.Card{
		{Host: "github.com", Repo: "acme/app", Number: 1, Title: "crash <on> start", State: "open", Labels: []string{"bug"},
			Assignees: []string{"ana"}, URL: "https://github.com/acme/app/issues/1", Updated: updated},
		{Host: "github.com", Repo: "acme/app", Number: 2, Title: "fix", State: "closed", PullRequest: true, Updated: updated.Add(time.Minute)},
		{Host: "github.com", Repo: "acme/lib", Number: 1, Title: "lib", State: "open", Updated: updated.Add(-time.Minute)},
	} {
		if _, err := board.Put(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	newServer := func(repos ...string) http.Handler {
		srv, err := server.New(server.Config{Runs: server.NewMemoryRunStore(), Leases: lease.NewMemoryStore(), Forge: fc,
			APIToken: "a", WebhookSecret: "w", Board: board, BoardRepos: repos})
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		return srv.Handler()
	}
	h := newServer("acme/app", "acme/lib")
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}

	code, body := get(h, "/board?format=json")
	var cards []map[string]any
	if err := json.Unmarshal([]byte(body), &cards); code != 200 || err != nil || len(cards) != 3 {
		t.Fatalf("GET /board?format=json = %d %s (%v), want 200 and 3 cards", code, body, err)
	}
	first := cards[0]
	if first["repo"] != "acme/app" || first["number"] != 2.0 || first["pull_request"] != true || first["state"] != "closed" ||
		first["updated"] != "2026-09-30T14:01:00Z" || fmt.Sprint(first["labels"]) != "[]" {
		t.Errorf("first card %v, want acme/app#2, the closed pull request updated at 14:01Z with labels []: newest first, every field on the wire", first)
	}
	if code, body := get(h, "/board?format=json&repo=acme/app&state=open"); code != 200 || strings.Count(body, `"number"`) != 1 || !strings.Contains(body, `"assignees":["ana"]`) {
		t.Errorf("GET /board filtered = %d %s, want the one open card of acme/app: repo and state filter", code, body)
	}
	if code, body := get(h, "/board?format=json&limit=1"); code != 200 || strings.Count(body, `"number"`) != 1 {
		t.Errorf("GET /board?limit=1 = %d %s, want one card: limit bounds", code, body)
	}
	code, body = get(h, "/board")
	if code != 200 || !strings.Contains(body, "<table>") || !strings.Contains(body, "crash &lt;on&gt; start") || !strings.Contains(body, `href="https://github.com/acme/app/issues/1"`) {
		t.Errorf("GET /board = %d %s, want an HTML table with the escaped title linked to the issue", code, body)
	}
	for _, q := range []string{"state=merged", "repo=acme", "limit=0", "limit=x", "format=xml"} {
		field, _, _ := strings.Cut(q, "=")
		if code, body := get(h, "/board?"+q); code != 400 || !strings.Contains(body, field) {
			t.Errorf("GET /board?%s = %d %s, want 400 naming %s: bad input names the field", q, code, body, field)
		}
	}
	if code, _ := get(newServer(), "/board"); code != 404 {
		t.Errorf("GET /board without board repositories = %d, want 404: no repositories, no board", code)
	}
}

func TestNewRejectsBadBoardConfigNamingTheField(t *testing.T) {
	fc := newForge(t, "http://127.0.0.1:1/", nil, "tok", nil, nil)
	for _, c := range []struct {
		field string
		mod   func(*server.Config)
	}{
		{"BoardInterval", func(c *server.Config) { c.BoardInterval = -time.Second }},
		{`Repos entry "nope"`, func(c *server.Config) { c.BoardRepos = []string{"nope"} }},
	} {
		cfg := server.Config{Runs: server.NewMemoryRunStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "a", WebhookSecret: "w", BoardRepos: []string{"acme/app"}}
		c.mod(&cfg)
		if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New with a bad %s = %v, want an error naming it", c.field, err)
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
