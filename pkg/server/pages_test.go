package server_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// pageNow is the fixed clock of the page tests.
var pageNow = time.Date(2026, 9, 30, 15, 0, 0, 0, time.UTC)

func atPageNow(c *server.Config) { c.Now = func() time.Time { return pageNow } }

// wantAll fails for each of wants that body lacks.
func wantAll(t *testing.T, what, body string, why string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q, want it: %s\n%s", what, w, why, body)
		}
	}
}

func TestIndexLinksEveryPageAndShowsTheOwnersTerms(t *testing.T) {
	elected := make(chan struct{})
	var once sync.Once
	f := newHTTPFixture(t, atPageNow, func(c *server.Config) {
		c.OnLeaseEvent = func(ev lease.Event) {
			if ev.Kind == lease.Elected {
				once.Do(func() { close(elected) })
			}
		}
	})
	code, body := f.do(t, "GET", "/", pageAuth, "")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200: the index exists", code)
	}
	wantAll(t, "GET /", body, "the index links every page, /metrics and /healthz, and names the owner",
		`href="/leases"`, `href="/runs"`, `href="/metrics"`, `href="/healthz"`, `<html lang="en">`, `<code>replica-a</code>`, "holds 0")
	if code, _ := f.do(t, "GET", "/nope", nil, ""); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404: only / itself is the index", code)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(ctx, nil) }()
	<-elected
	_, body = f.do(t, "GET", "/", pageAuth, "")
	wantAll(t, "GET / while elected", body, "the index lists the replica's own terms with their TTL",
		"holds 1", "<td>merge-gate-sweeper</td>", `<td class="num">3 m</td>`)
	_, body = f.do(t, "GET", "/leases", pageAuth, "")
	wantAll(t, "GET /leases while elected", body, "an own term shows its age (0 on this fixed clock) and TTL",
		"held by this replica", `<td>0 ms</td>`, `<td class="num">3 m</td>`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestLeasesPageSaysOwnerAndWhatIsKnown(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	for _, h := range []struct {
		name, owner string
		from        time.Duration
	}{{"merge-gate-sweeper", "replica-b", 0}, {"old-net", "replica-c", -2 * time.Minute}} {
		if ok, err := f.leases.Acquire(context.Background(), h.name, h.owner, pageNow.Add(h.from), 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", h.name, ok, err)
		}
	}
	_, body := f.do(t, "GET", "/leases", pageAuth, "")
	wantAll(t, "GET /leases", body, "one word, owner; a header on every column; another owner's term age is not known here; expired rows say so",
		"<th>owner</th>", "<th>state</th>", "not known here", "<td>expired</td>", `<td class="num">3 m</td>`, "not elected here",
		`title="2026-09-30T15:01:30.000Z">in 1.5 m</time>`, `title="2026-09-30T14:59:30.000Z">30 s ago</time>`)
	if strings.Contains(body, "holder") || strings.Contains(body, "#999") {
		t.Errorf("GET /leases says holder or uses #999, want owner and AA contrast\n%s", body)
	}
}

// TestLeasesPageShowsGroups pins the lease groups' part of /leases: each
// group's shards by owner, a live member's count against its share and the
// fair share, an owner that holds shards without being a live member, and
// the shards nobody holds.
func TestLeasesPageShowsGroups(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	take := func(name, owner string) {
		t.Helper()
		if ok, err := f.leases.Acquire(context.Background(), name, owner, pageNow, 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", name, ok, err)
		}
	}
	// Group g of 5 shards: members a and b; a holds 0 and 1, b holds 2,
	// c (no member lease) holds 3; 4 is unheld.
	take(lease.MemberName("g", 5, "a"), "a")
	take(lease.MemberName("g", 5, "b"), "b")
	for shard, owner := range []string{"a", "a", "b", "c"} {
		take(lease.ShardName("g", 5, shard), owner)
	}
	_, body := f.do(t, "GET", "/leases", pageAuth, "")
	wantAll(t, "GET /leases with a group", body, "each group shows its shards by owner, every member's count against its share, and the unheld shards",
		"<h3>g: 5 shards, 2 live members, fair share 3</h3>",
		"<td><code>a</code></td><td class=\"num\">2</td>\n<td class=\"num\">3 of at most 3</td><td>0-1</td>",
		"<td><code>b</code></td><td class=\"num\">1</td>\n<td class=\"num\">2 of at most 3</td><td>2</td>",
		"<td><code>c</code></td><td class=\"num\">1</td>\n<td class=\"num\"><span class=\"muted\">not a live member</span></td><td>3</td>",
		"<p>Unheld: 4</p>")
}

// TestLeasesPageListsAGroupsLeasesUnderIt pins that a lease group of many
// shards does not bury the other leases on /leases: the first table lists
// the leases of no group, and each group's shard and member leases are
// listed under the group, folded; and that the index sums up the shards
// the replica holds in one line per group.
func TestLeasesPageListsAGroupsLeasesUnderIt(t *testing.T) {
	f := newHTTPFixture(t, atPageNow)
	take := func(name, owner string) {
		t.Helper()
		if ok, err := f.leases.Acquire(context.Background(), name, owner, pageNow, 90*time.Second); !ok || err != nil {
			t.Fatalf("Acquire(%s) = %v, %v", name, ok, err)
		}
	}
	take("forge-board-sync", "b")
	take(lease.MemberName("merge-gate-sweeper", 64, "replica-a"), "replica-a")
	for shard := range 64 {
		take(lease.ShardName("merge-gate-sweeper", 64, shard), "replica-a")
	}
	_, body := f.do(t, "GET", "/leases", pageAuth, "")
	groups := strings.Index(body, "<h2>Lease groups</h2>")
	details := strings.Index(body, "<details><summary>its 65 leases, one per shard and member</summary>")
	if groups < 0 || details < groups {
		t.Fatalf("GET /leases: got no folded list of the group's 65 leases under the groups\n%s", body)
	}
	if i := strings.Index(body, "<td>forge-board-sync</td>"); i < 0 || i > groups {
		t.Errorf("forge-board-sync at %d, want it in the first table (before %d): a lease of no group is listed first", i, groups)
	}
	for _, name := range []string{lease.ShardName("merge-gate-sweeper", 64, 0), lease.ShardName("merge-gate-sweeper", 64, 63), lease.MemberName("merge-gate-sweeper", 64, "replica-a")} {
		if i := strings.Index(body, "<td>"+name+"</td>"); i < details {
			t.Errorf("%s at %d, want it under the group's folded list (after %d): a group's leases are listed under it", name, i, details)
		}
	}
	wantAll(t, "GET /leases with a group of 64", body, "the first line counts the leases listed under their group",
		"the 65 leases of lease groups are listed under their group")
	_, body = f.do(t, "GET", "/", pageAuth, "")
	wantAll(t, "GET / holding a group's shards", body, "the index sums up a group's shards the replica holds instead of listing each",
		"Lease group merge-gate-sweeper: 64 of its 64 shards (0-63)")
	if strings.Contains(body, lease.ShardName("merge-gate-sweeper", 64, 0)) {
		t.Errorf("GET / lists the shard lease %s, want the group summed up in one line", lease.ShardName("merge-gate-sweeper", 64, 0))
	}
}

// TestPagesNeedATokenByDefault pins that the pages, which list
// repositories, pull requests, heads, issue titles and assignees, answer
// 401 without a token; that the pages token or the API token opens them,
// as a bearer token or as basic auth's password; that a cookie opens
// nothing; that PublicPages opens them; and that /healthz and /metrics need
// no token either way.
func TestPagesNeedATokenByDefault(t *testing.T) {
	const pagesToken = "pages-read-only"
	basic := func(user, pw string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
	}
	pages := []string{"/", "/leases", "/leases?format=json", "/runs", "/board?format=json"}
	withToken := newHTTPFixture(t, func(c *server.Config) {
		c.PagesToken, c.BoardRepos = pagesToken, []string{"acme/app"}
	})
	for _, c := range []struct {
		why    string
		header map[string]string
		want   int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"a wrong bearer token", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"the token as a cookie", map[string]string{"Cookie": "token=" + pagesToken}, http.StatusUnauthorized},
		{"the pages token, bearer", map[string]string{"Authorization": "Bearer " + pagesToken}, http.StatusOK},
		{"the pages token, basic", basic("ops", pagesToken), http.StatusOK},
		{"the API token, bearer", pageAuth, http.StatusOK},
		{"the API token, basic", basic("", apiToken), http.StatusOK},
		{"a wrong basic password", basic("ops", "nope"), http.StatusUnauthorized},
	} {
		for _, path := range pages {
			if code, body := withToken.do(t, "GET", path, c.header, ""); code != c.want {
				t.Errorf("GET %s with %s: got %d %s, want %d", path, c.why, code, clipBody(body), c.want)
			}
		}
	}
	if code, _ := withToken.do(t, "POST", "/api/runs", map[string]string{"Authorization": "Bearer " + pagesToken}, `{}`); code != http.StatusUnauthorized {
		t.Errorf("POST /api/runs with the pages token: got %d, want 401: the pages token is read-only", code)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if code, _ := withToken.do(t, "GET", path, nil, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: got %d, want 200: liveness and metrics keep their own settings", path, code)
		}
	}
	public := newHTTPFixture(t, func(c *server.Config) { c.PublicPages, c.BoardRepos = true, []string{"acme/app"} })
	for _, path := range pages {
		if code, _ := public.do(t, "GET", path, nil, ""); code != http.StatusOK {
			t.Errorf("GET %s with PublicPages and no token: got %d, want 200", path, code)
		}
	}
}

// clipBody shortens a page body quoted in a failure.
func clipBody(b string) string { return b[:min(len(b), 120)] }
