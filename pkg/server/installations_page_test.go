package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// viewShards is the sweeper group's shard count in the installations
// view's tests: few, so several installations share a shard.
const viewShards = 4

// viewFixture is a deployment in App mode: replicas sharing one run store
// and one lease store, each with its own App client, over one simulator
// serving the App's installations.
type viewFixture struct {
	sim    *forgesim.Sim
	simURL string
	key    []byte
	runs   *gaterun.MemoryStore
	leases *lease.MemoryStore
}

// viewReplica is one replica of a viewFixture.
type viewReplica struct {
	owner string
	app   *forge.AppClient
	srv   *server.Server
	url   string
}

func newViewFixture(t *testing.T, installations int) *viewFixture {
	t.Helper()
	sim, simSrv := startSim(t)
	if err := sim.SeedInstallations(installations, 1); err != nil {
		t.Fatal(err)
	}
	return &viewFixture{sim: sim, simURL: simSrv.URL, key: forgetest.AppKey(t), runs: gaterun.NewMemoryStore(), leases: lease.NewMemoryStore()}
}

// replica starts a replica named owner, its App client listing the
// installations once, with opts applied to its Config.
func (f *viewFixture) replica(t *testing.T, owner string, opts ...func(*server.Config)) *viewReplica {
	t.Helper()
	app, err := forge.NewApp(forge.AppConfig{BaseURL: f.simURL + "/", AppID: 42, PrivateKey: f.key, ETagCacheBytes: -1})
	if err != nil {
		t.Fatalf("forge.NewApp: %v", err)
	}
	if err := app.Relist(context.Background()); err != nil {
		t.Fatalf("Relist: %v", err)
	}
	cfg := server.Config{Runs: f.runs, Leases: f.leases, App: app, SweepShards: viewShards, APIToken: apiToken,
		Owner: owner, Now: func() time.Time { return pageNow }}
	for _, opt := range opts {
		opt(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &viewReplica{owner: owner, app: app, srv: srv, url: hs.URL}
}

// hold makes owner the holder of the sweeper shard of installation id.
func (f *viewFixture) hold(t *testing.T, id int64, owner string) {
	t.Helper()
	name := lease.ShardName(server.MergeGateSweeper().Name, viewShards, server.InstallationShard(id, viewShards))
	if ok, err := f.leases.Acquire(context.Background(), name, owner, pageNow, time.Minute); !ok || err != nil {
		t.Fatalf("Acquire(%s, %s) = %v, %v", name, owner, ok, err)
	}
}

// putRuns stores n unsettled runs of installation id.
func (f *viewFixture) putRuns(t *testing.T, id int64, n int) {
	t.Helper()
	for pull := 1; pull <= n; pull++ {
		repo := "org-" + strconv.FormatInt(id, 10) + "/repo-1"
		r := gaterun.Run{ID: gaterun.ID("github.com", repo, pull, headSHA), Host: "github.com", Repo: repo, Pull: pull,
			HeadSHA: headSHA, Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: id}
		if _, err := f.runs.Put(context.Background(), r, pageNow); err != nil {
			t.Fatal(err)
		}
	}
}

// spend makes n reads with installation id's client, so its budget
// figures are known to r and DefaultBudget−n.
func (r *viewReplica) spend(t *testing.T, id int64, n int) {
	t.Helper()
	c, err := r.app.Installation(id)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := c.ListIssues(context.Background(), "org-"+strconv.FormatInt(id, 10), "repo-1", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
}

// get GETs path with header and returns the status and body.
func (r *viewReplica) get(t *testing.T, path string, header map[string]string) (int, string) {
	t.Helper()
	return (&httpFixture{url: r.url}).do(t, "GET", path, header, "")
}

// installations GETs /api/installations?query and decodes it.
func (r *viewReplica) installations(t *testing.T, query string) server.Installations {
	t.Helper()
	code, body := r.get(t, "/api/installations?"+query, pageAuth)
	var out server.Installations
	if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("GET /api/installations?%s = %d %s, want 200 and the JSON", query, code, body)
	}
	return out
}

// row is one installation's view as "id account shard holder mine
// last-pass core graphql runs", budgets and the pass "-" when null.
func row(v server.InstallationView) string {
	last, core, gql := "-", "-", "-"
	if v.LastPass != nil {
		last = v.LastPass.Format(time.RFC3339)
	}
	if v.CoreRemaining != nil {
		core = strconv.Itoa(*v.CoreRemaining)
	}
	if v.GraphQLRemaining != nil {
		gql = strconv.Itoa(*v.GraphQLRemaining)
	}
	return fmt.Sprintf("%d %s %d %s %v %s %s %s %d", v.ID, v.Account, v.Shard, v.Holder, v.HeldByMe, last, core, gql, v.RunsOpen)
}

// TestInstallationsShowEveryInstallationAlikeFromEveryReplica pins GET
// /api/installations: each installation's ID, account, shard (the one
// InstallationShard names), the holder of that shard's lease ("" when
// unheld, held_by_me on the holder), its last complete pass and budgets
// as the sweeping replica recorded them, and its open runs; and that a
// replica that is not the holder, and never spoke for the installation,
// answers the same pass and budgets.
func TestInstallationsShowEveryInstallationAlikeFromEveryReplica(t *testing.T) {
	f := newViewFixture(t, 3)
	a, b := f.replica(t, "replica-a"), f.replica(t, "replica-b")
	f.hold(t, 1, "replica-a")
	f.putRuns(t, 1, 2)
	f.putRuns(t, 2, 1)
	a.spend(t, 1, 7)
	passAt := pageNow.Add(-30 * time.Second)
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 1, At: passAt, Complete: true})
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 2, At: passAt, Complete: false}) // incomplete: not a last pass

	shard := func(id int64) int { return server.InstallationShard(id, viewShards) }
	holder := func(id int64) string {
		if shard(id) == shard(1) {
			return "replica-a"
		}
		return ""
	}
	core := strconv.Itoa(forgesim.DefaultBudget - 7)
	want := func(self string) []string {
		mine := func(id int64) bool { return holder(id) == self }
		return []string{
			fmt.Sprintf("1 org-1 %d %s %v %s %s - 2", shard(1), holder(1), mine(1), passAt.Format(time.RFC3339), core),
			fmt.Sprintf("2 org-2 %d %s %v - - - 1", shard(2), holder(2), mine(2)),
			fmt.Sprintf("3 org-3 %d %s %v - - - 0", shard(3), holder(3), mine(3)),
		}
	}
	for _, r := range []*viewReplica{a, b} {
		got := r.installations(t, "sort=id")
		if got.Shards != viewShards || !got.AsOf.Equal(pageNow) || got.Next != "" {
			t.Errorf("%s: shards %d, as_of %v, next %q; want %d, %v, \"\"", r.owner, got.Shards, got.AsOf, got.Next, viewShards, pageNow)
		}
		var rows []string
		for _, v := range got.Installations {
			rows = append(rows, row(v))
		}
		if w := want(r.owner); fmt.Sprint(rows) != fmt.Sprint(w) {
			t.Errorf("%s answers\n%s\nwant\n%s\nthe holder of each shard, the pass and budgets the sweeper recorded, the open runs: alike on every replica",
				r.owner, strings.Join(rows, "\n"), strings.Join(w, "\n"))
		}
	}
}

// TestInstallationsBudgetIsTheFreshestFigure pins where a budget comes
// from: the serving replica's own figure when it is fresher than the one
// recorded with the last pass (within one window, the lesser remaining),
// the recorded one otherwise; and a figure whose window has reset counts
// as the whole limit.
func TestInstallationsBudgetIsTheFreshestFigure(t *testing.T) {
	f := newViewFixture(t, 2)
	a, b := f.replica(t, "replica-a"), f.replica(t, "replica-b")
	a.spend(t, 1, 2)
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 1, At: pageNow, Complete: true})
	b.spend(t, 1, 3) // b offered a run since: the budget went down by 3 more
	for _, c := range []struct {
		r    *viewReplica
		want int
		why  string
	}{
		{a, forgesim.DefaultBudget - 2, "a knows only its own figure and the one it recorded"},
		{b, forgesim.DefaultBudget - 5, "b's own figure is later in the same window than the recorded one"},
	} {
		v := c.r.installations(t, "sort=id").Installations[0]
		if v.CoreRemaining == nil || *v.CoreRemaining != c.want {
			t.Errorf("%s: core_remaining %s, want %d: %s", c.r.owner, row(v), c.want, c.why)
		}
	}
	reset := pageNow.Add(-time.Minute)
	if err := f.runs.RecordSweeps(context.Background(), []gaterun.InstallationSweep{{Installation: 2, At: pageNow.Add(-time.Hour), Owner: "replica-a",
		Budgets: []forge.RateLimit{{Resource: "core", Limit: 5000, Remaining: 3, Reset: reset}}}}); err != nil {
		t.Fatal(err)
	}
	if v := b.installations(t, "sort=id").Installations[1]; v.CoreRemaining == nil || *v.CoreRemaining != 5000 {
		t.Errorf("installation 2 with 3 left in a window that reset at %v: %s, want 5000: a reset window is whole again", reset, row(v))
	}
}

// TestInstallationsPaginateLowestBudgetFirst pins the listing: the lowest
// budget first by default (installations with no figure last, ties by
// ID), ?sort=id by ID, ?limit= per page, and next followed to the end
// lists each installation once.
func TestInstallationsPaginateLowestBudgetFirst(t *testing.T) {
	f := newViewFixture(t, 7)
	a := f.replica(t, "replica-a")
	for id, n := range map[int64]int{2: 5, 5: 9, 6: 1, 7: 5} {
		a.spend(t, id, n)
	}
	list := func(query string) []int64 {
		var ids []int64
		for cursor, pages := "", 0; ; pages++ {
			if pages > 7 {
				t.Fatalf("%s: more than 7 pages", query)
			}
			q := query
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			got := a.installations(t, q)
			if len(got.Installations) > 3 {
				t.Fatalf("%s: a page of %d, want at most limit 3", q, len(got.Installations))
			}
			for _, v := range got.Installations {
				ids = append(ids, v.ID)
			}
			if cursor = got.Next; cursor == "" {
				return ids
			}
		}
	}
	if got := fmt.Sprint(list("limit=3")); got != "[5 2 7 6 1 3 4]" {
		t.Errorf("by budget: %s, want [5 2 7 6 1 3 4]: the lowest budget first, ties by ID, no figure last, each once", got)
	}
	if got := fmt.Sprint(list("limit=3&sort=id")); got != "[1 2 3 4 5 6 7]" {
		t.Errorf("by ID: %s, want [1 2 3 4 5 6 7]", got)
	}
}

// TestInstallationsRefuseBadParametersNamingThem pins the 400s.
func TestInstallationsRefuseBadParametersNamingThem(t *testing.T) {
	f := newViewFixture(t, 1)
	a := f.replica(t, "replica-a")
	idCursor := base64.RawURLEncoding.EncodeToString([]byte("id 0 1"))
	for _, c := range []struct{ query, names string }{
		{"sort=worst", "sort"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=x", "limit"},
		{"cursor=%21%21", "cursor"},
		{"sort=budget&cursor=" + idCursor, "cursor"}, // another sort's cursor
		{"srot=id", `unknown parameter \"srot\" (did you mean \"sort\"?); the parameters are sort, limit, cursor`}, // not ignored
	} {
		for _, path := range []string{"/api/installations?", "/installations?"} {
			code, body := a.get(t, path+c.query, pageAuth)
			if code != http.StatusBadRequest || !strings.Contains(body, c.names) {
				t.Errorf("GET %s%s = %d %s, want 400 naming %s", path, c.query, code, clipBody(body), c.names)
			}
		}
	}
}

// TestInstallationsAnswer404WithoutAnApp pins that a server with a forge
// token (or one installation) answers the view 404 with a JSON error
// saying it serves no App, and does not link it.
func TestInstallationsAnswer404WithoutAnApp(t *testing.T) {
	f := newHTTPFixture(t)
	for _, path := range []string{"/api/installations", "/installations"} {
		code, body := f.do(t, "GET", path, pageAuth, "")
		var e struct{ Error string }
		if code != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, "serves no GitHub App") {
			t.Errorf("GET %s in token mode = %d %s, want 404 {\"error\": \"...serves no GitHub App...\"}", path, code, body)
		}
	}
	if _, body := f.do(t, "GET", "/", pageAuth, ""); strings.Contains(body, `href="/installations"`) {
		t.Errorf("GET / in token mode links /installations, want no link to a page that answers 404")
	}
}

// TestInstallationsNeedAPageToken pins that the view opens like the other
// pages: the pages token or the API token, bearer or basic, or
// PublicPages; nothing else.
func TestInstallationsNeedAPageToken(t *testing.T) {
	const pagesToken = "pages-read-only"
	f := newViewFixture(t, 1)
	closed := f.replica(t, "replica-a", func(c *server.Config) { c.PagesToken = pagesToken })
	public := f.replica(t, "replica-b", func(c *server.Config) { c.PublicPages = true })
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+pagesToken))
	for _, path := range []string{"/installations", "/api/installations"} {
		for _, c := range []struct {
			r    *viewReplica
			auth string
			want int
		}{
			{closed, "", http.StatusUnauthorized},
			{closed, "Bearer nope", http.StatusUnauthorized},
			{closed, "Bearer " + pagesToken, http.StatusOK},
			{closed, basic, http.StatusOK},
			{closed, "Bearer " + apiToken, http.StatusOK},
			{public, "", http.StatusOK},
		} {
			h := map[string]string{}
			if c.auth != "" {
				h["Authorization"] = c.auth
			}
			if code, body := c.r.get(t, path, h); code != c.want {
				t.Errorf("GET %s on %s with %q = %d %s, want %d", path, c.r.owner, c.auth, code, clipBody(body), c.want)
			}
		}
	}
}

// TestInstallationsPageSummarisesAndPages pins the HTML page at 1,000
// installations: a summary of all of them (count, shards, the unheld ones
// and what they leave unswept, the lowest budget, the open runs), one page
// of DefaultInstallationsLimit rows the lowest budget first with a link to
// the next, an unheld shard's holder shown as none, and a link to the page
// in the navigation.
func TestInstallationsPageSummarisesAndPages(t *testing.T) {
	f := newViewFixture(t, 1000)
	a := f.replica(t, "replica-a")
	a.spend(t, 700, 4)
	f.putRuns(t, 700, 3)
	unswept := 0
	for id := int64(1); id <= 1000; id++ { // every shard but 0 held by replica-a
		if server.InstallationShard(id, viewShards) == 0 {
			unswept++
		} else {
			f.hold(t, id, "replica-a")
		}
	}
	code, body := a.get(t, "/installations", pageAuth)
	if code != http.StatusOK {
		t.Fatalf("GET /installations = %d %s", code, body)
	}
	wantAll(t, "GET /installations", body, "a summary of every installation, the lowest budget first, one page and a link to the next",
		"1000 installations of the App on 4 sweeper shards; this replica holds 3.",
		fmt.Sprintf("1 shard is unheld: nothing sweeps %d installations now.", unswept),
		fmt.Sprintf("Lowest budget: installation 700 (<code>org-700</code>), %d left.", forgesim.DefaultBudget-4),
		"3 runs open.", `href="/installations"`, `<a href="?cursor=`, ">next page</a>")
	if n := strings.Count(body, "<tr"); n != server.DefaultInstallationsLimit+1 {
		t.Errorf("GET /installations has %d table rows, want a header and %d: one page", n, server.DefaultInstallationsLimit)
	}
	first := strings.Index(body, "<tbody>")
	if i := strings.Index(body[first:], `<td class="num">700</td>`); i < 0 || i > strings.Index(body[first:], "</tr>") {
		t.Errorf("installation 700 is not the first row, want the lowest budget first")
	}
	if !strings.Contains(body, `<span class="bad">none</span>`) {
		t.Errorf("GET /installations shows no unheld holder as none")
	}
}

// failingSweeps is a run store whose RecordSweeps fails while fail is set.
type failingSweeps struct {
	*gaterun.MemoryStore
	fail bool
}

func (s *failingSweeps) RecordSweeps(ctx context.Context, sws []gaterun.InstallationSweep) error {
	if s.fail {
		return errors.New("store down")
	}
	return s.MemoryStore.RecordSweeps(ctx, sws)
}

// TestSweepRecordsSurviveAFailedWrite pins the recorder: a complete pass
// whose write fails is written with the next pass's, unless a later pass
// of the same installation replaced it; an incomplete pass, or the one
// sweeper of a token (installation 0), is not recorded.
func TestSweepRecordsSurviveAFailedWrite(t *testing.T) {
	f := newViewFixture(t, 3)
	st := &failingSweeps{MemoryStore: f.runs, fail: true}
	a := f.replica(t, "replica-a", func(c *server.Config) { c.Runs = st })
	pass := func(id int64, d time.Duration, complete bool) {
		a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: id, At: pageNow.Add(d), Complete: complete})
	}
	pass(1, 0, true)
	pass(2, 0, true)
	pass(2, time.Minute, true) // replaces 2's pending pass
	st.fail = false
	pass(3, 0, false) // incomplete: nothing queued, but a write of the pending
	pass(0, 0, true)  // not an installation's
	pass(3, 2*time.Minute, true)
	got, err := f.runs.Sweeps(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, sw := range got {
		rows = append(rows, fmt.Sprintf("%d@%s", sw.Installation, sw.At.Sub(pageNow)))
	}
	if fmt.Sprint(rows) != "[1@0s 2@1m0s 3@2m0s]" {
		t.Errorf("recorded %v, want [1@0s 2@1m0s 3@2m0s]: passes that failed to write are written later, the latest of each installation, complete ones only", rows)
	}
}

// chunkedSweeps is a run store that counts the sweeps of each
// RecordSweeps call.
type chunkedSweeps struct {
	*gaterun.MemoryStore
	calls []int
}

func (s *chunkedSweeps) RecordSweeps(ctx context.Context, sws []gaterun.InstallationSweep) error {
	s.calls = append(s.calls, len(sws))
	return s.MemoryStore.RecordSweeps(ctx, sws)
}

// TestSweepRecorderWritesInChunks pins that the recorder writes a
// replica's many installations in store calls of at most 100 sweeps each,
// every one of them written: one call of 1,000 outlived the store timeout
// on dev-mongo, and none was ever recorded.
func TestSweepRecorderWritesInChunks(t *testing.T) {
	f := newViewFixture(t, 3)
	st := &failingSweeps{MemoryStore: f.runs, fail: true}
	counted := &chunkedSweeps{MemoryStore: f.runs}
	runs := &struct{ gaterun.InstallationStore }{st}
	a := f.replica(t, "replica-a", func(c *server.Config) { c.Runs = runs })
	const n = 250
	for id := range int64(n) {
		a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: id + 1, At: pageNow, Complete: true})
	}
	st.fail = false
	runs.InstallationStore = counted
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 1, At: pageNow.Add(time.Minute), Complete: true})
	total := 0
	for _, c := range counted.calls {
		if c > 100 {
			t.Errorf("a RecordSweeps call of %d sweeps, want at most 100: each call fits the store timeout", c)
		}
		total += c
	}
	got, err := f.runs.Sweeps(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if total != n || len(got) != n {
		t.Errorf("calls %v wrote %d sweeps, %d recorded; want %d of each: every pending sweep written", counted.calls, total, len(got), n)
	}
}

// TestInstallationsShowTheSweepersPassesOnEveryReplica pins the view end
// to end, on App-mode replicas that sweep: after a few intervals every
// installation shows a complete pass of the last two intervals, the
// holder the lease store names for its shard, and the same pass on every
// replica, whether it holds the shard or not.
func TestInstallationsShowTheSweepersPassesOnEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, shards = 6, 4
		c, next := newAppCluster(t, n, true)
		startAppReplicas(t, c, next, 2, time.Minute, shards, nil)
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		now := time.Now()
		hs, err := c.leases.Holders(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		holderOf := map[string]string{}
		for _, h := range hs {
			if now.Before(h.Expires) {
				holderOf[h.Name] = h.Owner
			}
		}
		views := map[string][]server.InstallationView{}
		for _, r := range c.replicas {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/api/installations?sort=id", nil)
			req.Header.Set("Authorization", "Bearer "+apiToken)
			r.handler.ServeHTTP(rec, req)
			var got server.Installations
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil || len(got.Installations) != n {
				t.Fatalf("%s: GET /api/installations = %d %s, want 200 and %d installations", r.owner, rec.Code, rec.Body, n)
			}
			views[r.owner] = got.Installations
		}
		for i := range n {
			a, b := views["replica-1"][i], views["replica-2"][i]
			want := holderOf[lease.ShardName(server.MergeGateSweeper().Name, shards, a.Shard)]
			if a.Holder != want || a.Holder == "" {
				t.Errorf("installation %d: holder %q, want %q, the owner of its shard's lease", a.ID, a.Holder, want)
			}
			if a.GraphQLRemaining == nil || b.GraphQLRemaining == nil || *a.GraphQLRemaining != *b.GraphQLRemaining {
				t.Errorf("installation %d: graphql_remaining %s and %s, want one figure on both: the sweeper's queries spend it and its pass records it", a.ID, row(a), row(b))
			}
			if a.LastPass == nil || now.Sub(*a.LastPass) > 2*time.Minute {
				t.Errorf("installation %d: last pass %v, want one in the last two intervals before %v", a.ID, a.LastPass, now)
				continue
			}
			if b.LastPass == nil || !b.LastPass.Equal(*a.LastPass) || b.Holder != a.Holder || b.HeldByMe == a.HeldByMe {
				t.Errorf("installation %d: replica-2 shows %s, replica-1 %s; want the same pass and holder, held by exactly one", a.ID, row(b), row(a))
			}
		}
		for _, r := range c.replicas {
			r.stop()
		}
	})
}

// TestInstallationsShowASuspendedInstallationAsSuspended pins what the
// view shows of an installation GitHub suspended: the App serves it no
// token (so it is not one of the App client's installations), yet the
// page and the API list it as suspended, since when (GitHub's
// suspended_at) and its open runs, which wait; it does not count as
// unswept nor as never passed. The list the replica made says so: the
// page asks GitHub nothing.
func TestInstallationsShowASuspendedInstallationAsSuspended(t *testing.T) {
	f := newViewFixture(t, 3)
	if err := f.sim.SuspendInstallation(2); err != nil {
		t.Fatal(err)
	}
	at := f.sim.Now().Truncate(time.Second).UTC()
	a := f.replica(t, "replica-a")
	for id := int64(1); id <= 3; id++ {
		f.hold(t, id, "replica-a")
	}
	f.putRuns(t, 2, 3)
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 1, At: pageNow, Complete: true})
	a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: 3, At: pageNow, Complete: true})
	before := f.sim.Requests(forgesim.Filter{})

	got := a.installations(t, "sort=id")
	var rows []string
	for _, v := range got.Installations {
		sus := "-"
		if v.SuspendedAt != nil {
			sus = v.SuspendedAt.Format(time.RFC3339)
		}
		rows = append(rows, fmt.Sprintf("%d %s %v %s %d", v.ID, v.Account, v.Suspended, sus, v.RunsOpen))
	}
	want := []string{"1 org-1 false - 0", "2 org-2 true " + at.Format(time.RFC3339) + " 3", "3 org-3 false - 0"}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("GET /api/installations rows (id account suspended suspended_at runs_open)\n%s\nwant\n%s\na suspended installation is listed as suspended, since GitHub's suspended_at, with its open runs",
			strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	code, body := a.get(t, "/installations?sort=id", pageAuth)
	if code != http.StatusOK {
		t.Fatalf("GET /installations = %d %s", code, body)
	}
	wantAll(t, "GET /installations", body, "the suspended installation counted, its row marked, its runs said to wait",
		"3 installations of the App on 4 sweeper shards",
		"1 installation is suspended: GitHub serves it no token, so nothing sweeps it, and 3 open runs wait until an owner of the account unsuspends it.",
		`<span class="bad">suspended since <time`, "3 runs open.")
	if strings.Contains(body, "never had a complete pass") {
		t.Errorf("GET /installations counts the suspended installation as never passed, want it counted as suspended only")
	}
	if n := f.sim.Requests(forgesim.Filter{}) - before; n != 0 {
		t.Errorf("the view sent GitHub %d requests, want none: it shows what the App client last heard", n)
	}
}

// TestInstallationsRankASuspendedInstallationsBudgetLast pins the budget
// order and the "lowest budget" line for a suspended installation: GitHub
// serves it no token, so the budget its last pass recorded (known until
// its window resets) is none it can spend. It is never the page's lowest
// budget, and ?sort=budget ranks it after every installation with a
// figure and after those with none, alike on every page of the API
// (which iterion installations lists in the order it gets) and on the
// page.
func TestInstallationsRankASuspendedInstallationsBudgetLast(t *testing.T) {
	f := newViewFixture(t, 4)
	a := f.replica(t, "replica-a")
	for id := int64(1); id <= 4; id++ {
		f.hold(t, id, "replica-a")
	}
	for id, reads := range map[int64]int{1: 3, 2: 9, 3: 1} { // installation 4 spends nothing: no figure
		a.spend(t, id, reads)
		a.srv.RecordSweepPass(server.SweepPass{Owner: "replica-a", Installation: id, At: pageNow, Complete: true})
	}
	if err := f.sim.SuspendInstallation(2); err != nil {
		t.Fatal(err)
	}
	if err := a.app.Relist(context.Background()); err != nil { // GitHub lists it suspended
		t.Fatal(err)
	}

	const want = "[1 3 4 2]"
	var ids []int64
	for _, v := range a.installations(t, "sort=budget").Installations {
		ids = append(ids, v.ID)
	}
	if fmt.Sprint(ids) != want {
		t.Errorf("GET /api/installations?sort=budget: %v, want %s: the lowest budget first, no figure after, the suspended installation 2 last though its recorded budget is the lowest", ids, want)
	}
	var paged []int64
	for q := "sort=budget&limit=1"; ; {
		page := a.installations(t, q)
		for _, v := range page.Installations {
			paged = append(paged, v.ID)
		}
		if page.Next == "" {
			break
		}
		q = "sort=budget&limit=1&cursor=" + page.Next
	}
	if fmt.Sprint(paged) != want {
		t.Errorf("GET /api/installations?sort=budget one a page: %v, want %s: each page follows the same order", paged, want)
	}
	code, body := a.get(t, "/installations", pageAuth)
	if code != http.StatusOK {
		t.Fatalf("GET /installations = %d %s", code, body)
	}
	wantAll(t, "GET /installations", body, "the lowest budget named is an installation served, not the suspended one",
		fmt.Sprintf("Lowest budget: installation 1 (<code>org-1</code>), %d left.", forgesim.DefaultBudget-3))
	if i, j := strings.Index(body, "<td><code>org-4</code>"), strings.Index(body, "<td><code>org-2</code>"); i < 0 || j < i {
		t.Errorf("GET /installations rows: org-4 at %d, org-2 at %d; want the suspended org-2 after org-4, which has no figure", i, j)
	}
}
