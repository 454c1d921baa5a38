package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// installationsNow is the servers' clock in these tests.
var installationsNow = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

// appServer serves a replica in App mode, "replica-a", over a simulator
// with installations 1..n, API token "api" and pages token "pages"; the
// shard of installation 1 is held by replica-a and its last complete pass
// was a minute ago, recording 2 uncovered runs; installation n, when n is
// 3, is suspended since two hours ago, with 4 open runs.
func appServer(t *testing.T, n int) string {
	t.Helper()
	sim, simSrv := forgetest.StartSim(t)
	if err := sim.SeedInstallations(n, 1); err != nil {
		t.Fatal(err)
	}
	app, err := forge.NewApp(forge.AppConfig{BaseURL: simSrv.URL + "/", AppID: 42, PrivateKey: forgetest.AppKey(t), ETagCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	runs, leases := gaterun.NewMemoryStore(), lease.NewMemoryStore()
	if n == 3 {
		app.HandleInstallationEvent(&github.InstallationEvent{Action: github.Ptr("suspend"), Installation: &github.Installation{
			ID: github.Ptr(int64(3)), SuspendedAt: &github.Timestamp{Time: installationsNow.Add(-2 * time.Hour)}}})
		for pull := 1; pull <= 4; pull++ {
			r := gaterun.Run{ID: gaterun.ID("github.com", "org-3/repo-1", pull, strings.Repeat("a", 40)), Host: "github.com", Repo: "org-3/repo-1",
				Pull: pull, HeadSHA: strings.Repeat("a", 40), Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: 3}
			if _, err := runs.Put(context.Background(), r, installationsNow); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv, err := server.New(server.Config{Runs: runs, Leases: leases, App: app, SweepShards: 8, APIToken: "api", PagesToken: "pages",
		Owner: "replica-a", Now: func() time.Time { return installationsNow }})
	if err != nil {
		t.Fatal(err)
	}
	shard := lease.ShardName(server.MergeGateSweeper().Name, 8, server.InstallationShard(1, 8))
	if ok, err := leases.Acquire(context.Background(), shard, "replica-a", installationsNow, time.Minute); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if err := runs.RecordSweeps(context.Background(), []gaterun.InstallationSweep{{Installation: 1, At: installationsNow.Add(-time.Minute), Owner: "replica-a", Uncovered: 2,
		Budgets: []forge.RateLimit{{Resource: "core", Limit: 5000, Remaining: 4990, Reset: installationsNow.Add(time.Hour)}}}}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// runInstallationsCmd runs the command with args and an environment, and
// returns its exit code, stdout and stderr.
func runInstallationsCmd(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs strings.Builder
	err := installations(t.Context(), args, func(k string) string { return env[k] }, http.DefaultClient, &out, io.Discard)
	code := exitCode(&errs, "installations", err)
	return code, out.String(), errs.String()
}

// TestInstallationsPrintsEachInstallation pins the table: a line of
// totals, then each installation with its shard, holder ("none" when
// unheld, "(this server)" on the holder, "suspended" and since when for a
// suspended installation), last pass relative to the server's now,
// budgets ("?" unknown), open runs and of them those no installation
// covers; every page followed.
func TestInstallationsPrintsEachInstallation(t *testing.T) {
	url := appServer(t, 3)
	code, out, errs := runInstallationsCmd(t, nil, "--server", url, "--token", "pages", "--sort", "id")
	if code != 0 {
		t.Fatalf("exit %d, %s; want 0", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"3 installations shown, 8 shards, as of 2026-09-30T15:00:00.000Z"},
		{"ID", "ACCOUNT", "SHARD", "HOLDER", "LAST PASS", "CORE", "GRAPHQL", "RUNS OPEN", "UNCOVERED"},
		{"1", "org-1", fmt.Sprint(server.InstallationShard(1, 8)), "replica-a (this server)", "1 m ago", "4990", "?", "0", "2"},
		{"2", "org-2", fmt.Sprint(server.InstallationShard(2, 8)), "none", "never", "?", "?", "0", "0"},
		{"3", "org-3", fmt.Sprint(server.InstallationShard(3, 8)), "suspended 2 h ago", "never", "?", "?", "4", "0"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		for _, cell := range w {
			if !strings.Contains(lines[i], cell) {
				t.Errorf("line %d %q lacks %q: each installation's shard, holder or suspension, last pass, budgets, runs and uncovered runs", i, lines[i], cell)
			}
		}
		if f := strings.Fields(lines[i]); i >= 2 && fmt.Sprint(f[len(f)-2:]) != fmt.Sprint(w[len(w)-2:]) {
			t.Errorf("line %d %q ends %v, want %v: the last columns are the open runs and the uncovered runs", i, lines[i], f[len(f)-2:], w[len(w)-2:])
		}
	}
}

// TestInstallationsFollowsPagesAndLimits pins paging: with 1,500
// installations, more than one page of the server's, every one is
// printed once; --limit prints the first N and says more follow.
func TestInstallationsFollowsPagesAndLimits(t *testing.T) {
	url := appServer(t, 1500)
	env := map[string]string{"ITERION_SERVER": url, "ITERION_PAGES_TOKEN": "api"}
	code, out, errs := runInstallationsCmd(t, env, "--json", "--sort", "id")
	if code != 0 {
		t.Fatalf("exit %d, %s; want 0", code, errs)
	}
	if n := strings.Count(out, `"account": "org-`); n != 1500 || !strings.Contains(out, `"account": "org-1500"`) || !strings.Contains(out, `"next": ""`) {
		t.Errorf("--json printed %d installations, want all 1500 across pages, and next empty", n)
	}
	code, out, _ = runInstallationsCmd(t, env, "--limit", "5")
	if rows := strings.Count(out, "org-"); code != 0 || rows != 5 || !strings.Contains(out, "more installations follow") {
		t.Errorf("--limit 5: exit %d, %d rows:\n%s\nwant 5 rows and a note that more follow", code, rows, out)
	}
}

// TestInstallationsFailsClearly pins the failures: a usage error (no or a
// bad URL, both token sources) exits 2; a server that cannot be reached,
// refuses the token or serves no App exits 1 with a message saying so.
func TestInstallationsFailsClearly(t *testing.T) {
	app := appServer(t, 1)
	_, simSrv := forgetest.StartSim(t)
	fc, err := forge.New(forge.Config{BaseURL: simSrv.URL + "/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	tokenSrv, err := server.New(server.Config{Runs: gaterun.NewMemoryStore(), Leases: lease.NewMemoryStore(), Forge: fc, APIToken: "api"})
	if err != nil {
		t.Fatal(err)
	}
	tokenMode := httptest.NewServer(tokenSrv.Handler())
	t.Cleanup(tokenMode.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there now
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("pages\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		why   string
		args  []string
		code  int
		wants string
	}{
		{"no server", []string{"--token", "pages"}, 2, "--server (ITERION_SERVER) is required"},
		{"not a URL", []string{"--server", "iterion.internal:8080"}, 2, `--server "iterion.internal:8080" is not an http(s) URL`},
		{"two token sources", []string{"--server", app, "--token", "x", "--token-file", tokenFile}, 2, "choose one"},
		{"nothing listening", []string{"--server", gone.URL, "--token", "pages"}, 1, "connect: connection refused"},
		{"a wrong token", []string{"--server", app, "--token", "nope"}, 1, "401: the server refused the token"},
		{"no token", []string{"--server", app}, 1, "401: the server refused the token"},
		{"a token-mode server", []string{"--server", tokenMode.URL, "--token", "api"}, 1, "404: this server serves no GitHub App"},
		{"the token from a file", []string{"--server", app, "--token-file", tokenFile}, 0, ""},
	} {
		code, _, errs := runInstallationsCmd(t, nil, c.args...)
		if code != c.code || !strings.Contains(errs, c.wants) {
			t.Errorf("%s: exit %d, %q; want exit %d and %q", c.why, code, errs, c.code, c.wants)
		}
	}
}

// TestInstallationsRejectsAnotherServersAnswer pins that a 200 that is
// not the installations JSON is an error, not an empty table.
func TestInstallationsRejectsAnotherServersAnswer(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<html>a login page</html>")
	}))
	t.Cleanup(other.Close)
	code, _, errs := runInstallationsCmd(t, nil, "--server", other.URL, "--token", "x")
	if code != 1 || !strings.Contains(errs, "not the installations JSON") {
		t.Errorf("exit %d, %q; want exit 1 saying the answer is not the installations JSON", code, errs)
	}
}
