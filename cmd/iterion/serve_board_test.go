package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestServeBoardFlags(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a"}
	for _, c := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"board interval zero", append(base, "--board-interval", "0s"), env(), "--board-interval"},
		{"board repo without owner", append(base, "--board-repos", "acme/app,lib"), env(), `--board-repos entry "lib"`},
		{"board repo with a path", append(base, "--board-repos", "acme/app/x"), env(), `--board-repos entry "acme/app/x"`},
		{"env twin bad interval", base, env("ITERION_BOARD_INTERVAL", "hourly"), "ITERION_BOARD_INTERVAL"},
		{"full sync period zero", append(base, "--board-full-sync-every", "0s"), env(), "--board-full-sync-every 0s: want at least --board-interval"},
		{"full sync period negative", append(base, "--board-full-sync-every", "-1h"), env(), "--board-full-sync-every -1h0m0s"},
		{"full sync period under the interval", append(base, "--board-interval", "10m", "--board-full-sync-every", "5m"), env(), "--board-full-sync-every 5m0s: want at least --board-interval, 10m0s"},
		{"env twin bad full sync period", base, env("ITERION_BOARD_FULL_SYNC_EVERY", "daily"), "ITERION_BOARD_FULL_SYNC_EVERY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseServe(c.args, c.env, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseServe(%q) = %v, want an error naming %s: config is validated at start", c.args, err, c.want)
			}
		})
	}
	c, err := parseServe(base, env("ITERION_BOARD_REPOS", " acme/app, acme/lib ,", "ITERION_BOARD_INTERVAL", "2m", "ITERION_BOARD_FULL_SYNC_EVERY", "6h"), io.Discard)
	if err != nil || !slices.Equal(c.boardRepos, []string{"acme/app", "acme/lib"}) || c.boardInterval != 2*time.Minute || c.boardFullEvery != 6*time.Hour {
		t.Errorf("from the environment: got repos %q interval %v full sync every %v (%v), want [acme/app acme/lib], 2m and 6h: ITERION_BOARD_REPOS, ITERION_BOARD_INTERVAL and ITERION_BOARD_FULL_SYNC_EVERY are the flags' twins", c.boardRepos, c.boardInterval, c.boardFullEvery, err)
	}
	c, err = parseServe(base, env(), io.Discard)
	if err != nil || c.boardRepos != nil || c.boardInterval != board.DefaultInterval || c.boardFullEvery != board.DefaultFullEvery {
		t.Errorf("defaults: got repos %q interval %v full sync every %v (%v), want none, %v and %v: no repositories, no board", c.boardRepos, c.boardInterval, c.boardFullEvery, err, board.DefaultInterval, board.DefaultFullEvery)
	}
}

// TestServeRefusesABoardRepositoryListedTwice pins that a repository
// named twice in --board-repos, in any case (GitHub's names compare
// without it), is a bad setting like any other: reported by parseServe
// with the rest, naming the flag and both entries, and a usage error,
// which exits 2, not a failure of the server's start, which exits 1.
func TestServeRefusesABoardRepositoryListedTwice(t *testing.T) {
	base := []string{"--forge-token", "t", "--api-token", "a", "--board-repos", "acme/app,Acme/App"}
	_, err := parseServe(base, env(), io.Discard)
	for _, want := range []string{`--board-repos entry "Acme/App"`, `entry "acme/app"`, "listed twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseServe(--board-repos acme/app,Acme/App) = %v, want an error naming %s: a repository listed twice is a bad setting", err, want)
		}
	}
	if code := exitCode(io.Discard, "serve", err); code != 2 {
		t.Errorf("exit code %d, want 2: a repository listed twice is a bad setting, a usage error", code)
	}
	_, err = parseServe(append(base, "--store-timeout", "0s"), env(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "2 settings") {
		t.Errorf("parseServe(--board-repos acme/app,Acme/App --store-timeout 0s) = %v, want both reported at once", err)
	}
}

// TestServeRunsTheForgeBoard pins iterion serve with --board-repos: it
// elects itself for forge-board-sync, syncs the repository's issues, and
// serves them on GET /board; without --board-repos, GET /board is 404.
func TestServeRunsTheForgeBoard(t *testing.T) {
	sim := forgesim.New()
	if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: 7, Title: "board me", State: "open", Labels: []string{"bug"}}); err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	common := []string{"--listen", "127.0.0.1:0", "--forge-url", simSrv.URL + "/", "--forge-token", "tok", "--api-token", "api", "--sweep-interval", "1h"}

	url, log, stop := startServe(t, append(common, "--board-repos", "acme/app", "--board-interval", "200ms"))
	log.waitFor(t, `"msg":"board sync pass"`)
	var view board.View
	getJSON(t, url+"/board?format=json", &view)
	cards := view.Cards
	if st := view.Status; st == nil || !st.Self || st.Syncer == "" || st.LastPass == nil {
		t.Errorf("GET /board?format=json status = %+v, want this replica syncing, with a last complete pass: the JSON view carries the page's sync status", st)
	}
	if len(cards) != 1 || cards[0].Number != 7 || cards[0].Title != "board me" || cards[0].Host != strings.TrimPrefix(simSrv.URL, "http://") {
		t.Errorf("GET /board?format=json = %+v, want the issue numbered 7 filed under the forge's host: serve syncs --board-repos", cards)
	}
	var holders []leaseRow
	getJSON(t, url+"/leases?format=json", &holders)
	if !slices.ContainsFunc(holders, func(h leaseRow) bool { return h.Name == "forge-board-sync" }) {
		t.Errorf("leases %+v, want forge-board-sync held: the board runs under its own lease", holders)
	}
	if err := stop(); err != nil {
		t.Errorf("serve after the stop signal = %v, want nil", err)
	}

	url, _, stop = startServe(t, append(common, "--public-pages"))
	defer stop()
	resp, err := http.Get(url + "/board")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /board without --board-repos = %d, want 404: no repositories, no board net", resp.StatusCode)
	}
}

// TestServeKeepsTheBoardInMongo pins that with --mongo-uri the board's
// cards are in the shared database's board_cards collection.
func TestServeKeepsTheBoardInMongo(t *testing.T) {
	db := mongotest.DB(t)
	sim := forgesim.New()
	if err := sim.SeedIssue("acme", "app", forgesim.Issue{Number: 3, Title: "shared", State: "closed"}); err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	_, log, stop := startServe(t, []string{"--listen", "127.0.0.1:0", "--mongo-uri", mongotest.URI(t), "--mongo-db", db.Name(),
		"--forge-url", simSrv.URL + "/", "--forge-token", "tok", "--api-token", "api", "--sweep-interval", "1h",
		"--board-repos", "acme/app", "--board-interval", "200ms"})
	log.waitFor(t, `"msg":"board sync pass"`)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("serve after the stop signal = %v, want nil", err)
		}
	}()
	store, err := board.NewMongoStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	cards, err := store.Cards(context.Background(), board.Query{Limit: 10})
	if err != nil || len(cards) != 1 || cards[0].Title != "shared" || cards[0].State != "closed" {
		t.Errorf("board_cards = %+v, %v, want the issue numbered 3, closed: with --mongo-uri the board is in the shared database", cards, err)
	}
}
