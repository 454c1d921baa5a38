package server_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/server"
)

// appID is the App the App-mode tests' clients authenticate as.
const appID = 42

// appRepo is installation i's repository in the App-mode tests, as
// forgesim.SeedInstallations names it.
func appRepo(i int64) string { return fmt.Sprintf("org-%d/repo-1", i) }

// appRun is the success run of pull #1 of installation i's repository,
// at head sha-<i>.
func appRun(i int64) gaterun.Run {
	repo, sha := appRepo(i), fmt.Sprintf("sha-%d", i)
	return gaterun.Run{ID: gaterun.ID("github.com", repo, 1, sha), Host: "github.com", Repo: repo, Pull: 1, HeadSHA: sha,
		Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess, Installation: i}
}

// newAppCluster is newCluster for App mode: the simulator has
// installations 1..n of the App, installation i covering org-<i>/repo-1,
// whose pull #1 is open at head sha-<i>; with runs, each has its run
// (appRun) in the store, its status not yet published. opts configure the
// simulator.
func newAppCluster(t *testing.T, n int, runs bool, opts ...forgesim.Option) (c *cluster, next http.RoundTripper) {
	t.Helper()
	c = &cluster{sim: forgesim.New(opts...), leases: lease.NewMemoryStore(), runs: gaterun.NewMemoryStore(), tl: &timeline{}}
	next, stopSim := serveSimOnPipe(c.sim)
	t.Cleanup(stopSim)
	if err := c.sim.SeedInstallations(n, 1); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= int64(n); i++ {
		seedAppPull(t, c, i, runs)
	}
	return c, next
}

// seedAppPull opens pull #1 of installation i's repository and, with run,
// stores its run.
func seedAppPull(t *testing.T, c *cluster, i int64, run bool) {
	t.Helper()
	r := appRun(i)
	owner, name, _ := strings.Cut(r.Repo, "/")
	if err := c.sim.SeedPull(owner, name, 1, r.HeadSHA, "open"); err != nil {
		t.Fatal(err)
	}
	if run {
		if _, err := c.runs.Put(context.Background(), r, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// startAppReplicas is startReplicas in App mode: n more Servers (owners
// replica-<k>, k counting c's replicas from 1) serving every installation of App appID, each with its
// own AppClient (one key: the App's), sweeping every interval in a group
// of shards shards. next may be wrapped by wrap (nil: as is).
func startAppReplicas(t *testing.T, c *cluster, next http.RoundTripper, n int, interval time.Duration, shards int, mod func(*server.Config)) {
	t.Helper()
	key := forgetest.AppKey(t)
	for i := 1; i <= n; i++ {
		r := &replica{owner: fmt.Sprintf("replica-%d", len(c.replicas)+1)}
		reg := prometheus.NewRegistry()
		app, err := forge.NewApp(forge.AppConfig{BaseURL: "http://sim/", Next: next, AppID: appID, PrivateKey: key, Registerer: reg})
		if err != nil {
			t.Fatalf("forge.NewApp: %v", err)
		}
		r.app = app
		cfg := server.Config{Runs: c.runs, Leases: c.leases, App: app, SweepShards: shards, APIToken: apiToken, WebhookSecret: webhookSecret,
			Owner: r.owner, SweepInterval: interval, Registry: reg, OnLeaseEvent: c.tl.onEvent, OnSweep: c.tl.onSweep}
		c.start(t, r, cfg, mod)
	}
}

// installationTokenOf is the installation a simulator token was minted for
// ("ghs_sim_<id>_<n>"), or 0 for another token.
func installationTokenOf(tok string) int64 {
	var id, n int64
	if _, err := fmt.Sscanf(tok, "ghs_sim_%d_%d", &id, &n); err != nil {
		return 0
	}
	return id
}

// requestsBy sums the simulator's counts of installation id's tokens on
// route ("" any) with status (0 any).
func requestsBy(sim *forgesim.Sim, id int64, route string, status int) int64 {
	var n int64
	for _, rc := range sim.Stats().Requests {
		if installationTokenOf(rc.Token) == id && (route == "" || rc.Route == route) && (status == 0 || rc.Status == status) {
			n += rc.Count
		}
	}
	return n
}

// sweptBy is the passes c's timeline holds for installation id.
func sweptBy(c *cluster, id int64) []server.SweepPass {
	_, passes := c.tl.snapshot()
	var out []server.SweepPass
	for _, p := range passes {
		if p.Installation == id {
			out = append(out, p)
		}
	}
	return out
}

// shardTerms is the Elected events c's timeline holds for shards of the
// group merge-gate-sweeper.
func shardTerms(c *cluster) []lease.Event {
	events, _ := c.tl.snapshot()
	var out []lease.Event
	for _, e := range events {
		if e.Group == server.MergeGateSweeper().Name && e.Shard >= 0 && e.Kind == lease.Elected {
			out = append(out, e)
		}
	}
	return out
}

// windowUsed is what the simulator's budget window of installation id for
// resource has used; 0 when it has none open.
func windowUsed(sim *forgesim.Sim, id int64, resource string) int {
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == fmt.Sprintf("installation:%d", id) && w.Resource == resource {
			return w.Used
		}
	}
	return 0
}

// TestAppModeSweepsEachInstallationWithItsOwnToken pins that in App mode
// each installation's runs are swept through its own installation's
// client: the simulator, which answers a token 404 for a repository its
// installation does not cover, sees each installation's status written
// once, with its own token, no token refused, and each installation's own
// GraphQL budget spent by its pass; each installation's first pass is
// deep, and each pass names its installation.
func TestAppModeSweepsEachInstallationWithItsOwnToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		c, next := newAppCluster(t, n, true)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		c.replicas[0].stop()

		for i := int64(1); i <= n; i++ {
			if got := requestsBy(c.sim, i, statusRoute, http.StatusCreated); got != 1 {
				t.Errorf("installation %d: %d statuses written with its tokens, want 1: its run is published through its own client", i, got)
			}
			if got := windowUsed(c.sim, i, "graphql"); got == 0 {
				t.Errorf("installation %d: its GraphQL budget unspent, want its passes' queries on it: each installation's pass reads with its token", i)
			}
			passes := sweptBy(c, i)
			if len(passes) == 0 || !passes[0].Deep {
				t.Errorf("installation %d: passes %+v, want some, the first deep: an installation's first pass of a term is deep", i, passes)
			}
		}
		for _, rc := range c.sim.Stats().Requests {
			if rc.Status == http.StatusNotFound || rc.Status == http.StatusUnauthorized {
				t.Errorf("simulator answered %d %s to token %s %d times, want no refusal: no installation reads another's repository", rc.Status, rc.Route, rc.Token, rc.Count)
			}
		}
	})
}

// call sends a request to r's handler and returns the status and body;
// hook names a webhook event, signed with webhookSecret.
func (r *replica) call(t *testing.T, method, path, hook, body string) (int, string) {
	t.Helper()
	w := r.serve(method, path, hook, body)
	return w.Code, w.Body.String()
}

// serve is call's whole answer, headers included.
func (r *replica) serve(method, path, hook, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if hook != "" {
		req.Header.Set("X-GitHub-Event", hook)
		req.Header.Set("X-GitHub-Delivery", rand.Text())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", sign(webhookSecret, body))
	}
	w := httptest.NewRecorder()
	r.handler.ServeHTTP(w, req)
	return w
}

// postRun reports a success verdict for pull of repo at head sha to r
// (POST /api/runs) and returns the stored run's ID; r must answer 201.
func (r *replica) postRun(t *testing.T, repo string, pull int, sha string) string {
	t.Helper()
	code, body := r.call(t, "POST", "/api/runs", "", fmt.Sprintf(`{"repo":%q,"pull":%d,"head_sha":%q,"verdict":"success"}`, repo, pull, sha))
	var created struct{ ID string }
	if err := json.Unmarshal([]byte(body), &created); code != http.StatusCreated || err != nil {
		t.Fatalf("%s: POST /api/runs for %s#%d: %d %s, want 201 with the run's id", r.owner, repo, pull, code, body)
	}
	return created.ID
}

// addRepo adds repo to installation id at the simulator and delivers to r
// the installation_repositories event (added) GitHub sends for it,
// returning r's answer; r must answer 200.
func addRepo(t *testing.T, c *cluster, r *replica, id int64, repo string) string {
	t.Helper()
	if err := c.sim.AddInstallationRepos(id, repo); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"action":"added","installation":{"id":%d,"account":{"login":"org-%d"}},"repository_selection":"selected",`+
		`"repositories_added":[{"full_name":%q}],"repositories_removed":[]}`, id, id, repo)
	code, resp := r.call(t, "POST", "/webhooks/github", "installation_repositories", body)
	if code != http.StatusOK {
		t.Fatalf("installation_repositories added %s to installation %d: %d %s, want 200", repo, id, code, resp)
	}
	return resp
}

// TestAppModeRunsResolveTheirInstallation pins POST /api/runs in App mode:
// a run is stored with the installation that covers its repository, which
// GET /api/runs/{id} and /runs show and GET /api/runs?installation=
// selects by; a repository no installation covers is 422 naming it, and
// nothing is stored.
func TestAppModeRunsResolveTheirInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 3, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		sha := strings.Repeat("ab", 20)
		if err := c.sim.SeedPull("org-2", "repo-1", 2, sha, "open"); err != nil {
			t.Fatal(err)
		}
		created := r.postRun(t, "org-2/repo-1", 2, sha)
		code, body := r.call(t, "GET", "/api/runs/"+created, "", "")
		var view server.RunView
		if err := json.Unmarshal([]byte(body), &view); code != http.StatusOK || err != nil || view.Installation != 2 {
			t.Errorf("GET /api/runs/{id}: %d %s, want installation 2: a run knows the installation covering its repository", code, body)
		}
		if !strings.Contains(body, `"installation":2`) {
			t.Errorf("GET /api/runs/{id} = %s, want the field installation", body)
		}
		if code, body := r.call(t, "GET", "/api/runs?installation=2", "", ""); code != http.StatusOK || !strings.Contains(body, created) {
			t.Errorf("GET /api/runs?installation=2: %d %s, want the run: the API lists one installation's runs", code, body)
		}
		if code, body := r.call(t, "GET", "/api/runs?installation=3", "", ""); code != http.StatusOK || strings.Contains(body, created) {
			t.Errorf("GET /api/runs?installation=3: %d %s, want no run of installation 2", code, body)
		}
		if code, body := r.call(t, "GET", "/api/runs?installation=0", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "installation") {
			t.Errorf("GET /api/runs?installation=0: %d %s, want 400 naming installation", code, body)
		}
		if code, body := r.call(t, "GET", "/runs", "", ""); code != http.StatusOK || !strings.Contains(body, "<th>installation</th>") || !strings.Contains(body, "<td>2</td>") {
			t.Errorf("GET /runs: %d %s, want an installation column showing 2: /runs shows each run's installation in App mode", code, body)
		}

		code, body = r.call(t, "POST", "/api/runs", "", `{"repo":"acme/nowhere","pull":1,"head_sha":"`+sha+`","verdict":"success"}`)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "acme/nowhere") {
			t.Errorf("POST /api/runs for acme/nowhere: %d %s, want 422 naming the repository: no installation covers it", code, body)
		}
		if runs, _ := c.runs.List(context.Background(), gaterun.Query{Repo: "acme/nowhere", Limit: 10}); len(runs) != 0 {
			t.Errorf("runs of acme/nowhere stored: %d, want none: a refused run is not stored", len(runs))
		}
	})
}

// pullEvent is a pull_request webhook payload for installation id's
// repository's pull #1.
func pullEvent(id int64) string {
	owner, name, _ := strings.Cut(appRepo(id), "/")
	return fmt.Sprintf(`{"action":"synchronize","number":1,"pull_request":{"number":1,"state":"open","head":{"sha":"sha-%d"}},`+
		`"repository":{"name":%q,"full_name":%q,"owner":{"login":%q}},"installation":{"id":%d}}`, id, name, appRepo(id), owner, id)
}

// TestAppModeWebhookOfAnUnknownInstallationIsLookedUp pins that a webhook
// naming an installation the server does not know is answered 202, not
// processed and never crashed on, and that the installation is looked up
// (the App's installations listed again), so it is known after.
func TestAppModeWebhookOfAnUnknownInstallationIsLookedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the first list of the installations
		if err := c.sim.AddInstallation(9, "org-9", appRepo(9)); err != nil {
			t.Fatal(err)
		}
		seedAppPull(t, c, 9, true)
		if _, err := r.app.Installation(9); err == nil {
			t.Fatal("installation 9 known before any webhook or list named it")
		}
		code, body := r.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(9))
		if code != http.StatusAccepted || !strings.Contains(body, `"unknown_installation":9`) {
			t.Errorf("pull_request webhook of unknown installation 9: %d %s, want 202 naming it", code, body)
		}
		synctest.Wait()
		if _, err := r.app.Installation(9); err != nil {
			t.Errorf("installation 9 after the webhook: %v, want it known: an unknown installation is looked up", err)
		}
		if code, body := r.call(t, "POST", "/webhooks/github", "pull_request", pullEvent(9)); code != http.StatusOK {
			t.Errorf("pull_request webhook of installation 9 once known: %d %s, want 200: processed", code, body)
		}
		if got := requestsBy(c.sim, 9, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("installation 9: %d statuses written with its tokens, want 1: the event's run offered through its client", got)
		}
	})
}

// TestAppModeAWebhookNamingNoInstallationIsNotLookedUp pins that an
// event without installation.id (a repository's own webhook, not the
// App's) names no installation: it is not answered 202
// unknown_installation, and costs no list of the App's installations.
func TestAppModeAWebhookNamingNoInstallationIsNotLookedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 1, true)
		startAppReplicas(t, c, next, 1, time.Minute, 2, nil)
		r := c.replicas[0]
		defer r.stop()
		synctest.Wait() // the first list of the installations
		lists := c.sim.Requests(forgesim.Filter{Route: "GET /app/installations"})
		body := strings.Replace(pullEvent(1), `,"installation":{"id":1}`, "", 1)
		if code, answer := r.call(t, "POST", "/webhooks/github", "pull_request", body); code == http.StatusAccepted && strings.Contains(answer, "unknown_installation") {
			t.Errorf("pull_request webhook naming no installation: %d %s, want it processed, not an unknown installation", code, answer)
		}
		synctest.Wait()
		if n := c.sim.Requests(forgesim.Filter{Route: "GET /app/installations"}) - lists; n != 0 {
			t.Errorf("lists of the App's installations after the webhook: %d, want 0: it named no installation to look up", n)
		}
	})
}

// installationEvent is an installation webhook payload: action on
// installation id, listing its repository.
func installationEvent(action string, id int64) string {
	return fmt.Sprintf(`{"action":%q,"installation":{"id":%d,"account":{"login":"org-%d"}},"repositories":[{"full_name":%q}]}`,
		action, id, id, appRepo(id))
}

// notSweeping is a replica of c that does not hold the shard of
// installation id in the group merge-gate-sweeper of shards shards.
func notSweeping(t *testing.T, c *cluster, shards int, id int64) *replica {
	t.Helper()
	return shardReplica(t, c, shards, id, false)
}

// holderOf is the replica of c that holds the shard of installation id in
// the group merge-gate-sweeper of shards shards.
func holderOf(t *testing.T, c *cluster, shards int, id int64) *replica {
	t.Helper()
	return shardReplica(t, c, shards, id, true)
}

// shardReplica is a replica of c that holds (holds true) or does not hold
// the shard of installation id in the group merge-gate-sweeper of shards
// shards.
func shardReplica(t *testing.T, c *cluster, shards int, id int64, holds bool) *replica {
	t.Helper()
	name := lease.ShardName(server.MergeGateSweeper().Name, shards, server.InstallationShard(id, shards))
	hs, err := c.leases.Holders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Name != name {
			continue
		}
		for _, r := range c.replicas {
			if (r.owner == h.Owner) == holds {
				return r
			}
		}
	}
	t.Fatalf("no replica (holding: %v) for %s, or no holder: %+v", holds, name, hs)
	return nil
}

// TestAppModeInstallationsComeAndGoMidTerm pins that the shard terms
// follow the App's installations, whichever replica GitHub delivers the
// webhook to (here always one that does not sweep the installation; it
// tells the others through the lease store): one created mid-term is
// swept within 2 intervals, deep first, without a new shard term; one
// deleted gets no request from 1 interval after its webhook on, and the
// others are swept on.
func TestAppModeInstallationsComeAndGoMidTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, shards = time.Minute, 2
		c, next := newAppCluster(t, 2, true)
		startAppReplicas(t, c, next, 2, interval, shards, nil)
		defer c.stopAll()
		time.Sleep(5*interval + interval/2) // the two replicas settle to a shard each
		synctest.Wait()
		terms := len(shardTerms(c))

		if err := c.sim.AddInstallation(3, "org-3", appRepo(3)); err != nil {
			t.Fatal(err)
		}
		seedAppPull(t, c, 3, true)
		added := time.Now()
		if code, body := notSweeping(t, c, shards, 3).call(t, "POST", "/webhooks/github", "installation", installationEvent("created", 3)); code != http.StatusOK {
			t.Fatalf("installation created webhook: %d %s, want 200", code, body)
		}
		time.Sleep(2 * interval)
		synctest.Wait()
		passes := sweptBy(c, 3)
		if len(passes) == 0 || passes[0].At.After(added.Add(2*interval)) || !passes[0].Deep {
			t.Errorf("installation 3 added at %v: passes %+v, want a deep one within 2 intervals", added, passes)
		}
		if got := requestsBy(c.sim, 3, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("installation 3: %d statuses written, want 1: its run swept", got)
		}
		if n := len(shardTerms(c)); n != terms {
			t.Errorf("shard terms: %d after the installation came, %d before; want the same terms to pick it up", n, terms)
		}

		if err := c.sim.RemoveInstallation(1); err != nil {
			t.Fatal(err)
		}
		if code, body := notSweeping(t, c, shards, 1).call(t, "POST", "/webhooks/github", "installation", installationEvent("deleted", 1)); code != http.StatusOK {
			t.Fatalf("installation deleted webhook: %d %s, want 200", code, body)
		}
		time.Sleep(interval)
		synctest.Wait()
		before, swept, others := requestsBy(c.sim, 1, "", 0), len(sweptBy(c, 1)), len(sweptBy(c, 2))
		time.Sleep(5 * interval)
		synctest.Wait()
		if after := requestsBy(c.sim, 1, "", 0); after != before {
			t.Errorf("installation 1 deleted: %d requests with its tokens in the 5 intervals after the first, want none", after-before)
		}
		if n := len(sweptBy(c, 1)); n != swept {
			t.Errorf("installation 1 deleted: %d passes after the first interval, want none", n-swept)
		}
		if n := len(sweptBy(c, 2)) - others; n < 5 {
			t.Errorf("installation 2: %d passes in 5 intervals, want one an interval: the others go on", n)
		}
	})
}

// passSpan is one sweep pass of an installation and when it ended.
type passSpan struct {
	p   server.SweepPass
	end time.Time
}

// spans records every pass's span, by installation.
type spans struct {
	mu sync.Mutex
	by map[int64][]passSpan
}

func (s *spans) onSweep(next func(server.SweepPass)) func(server.SweepPass) {
	return func(p server.SweepPass) {
		s.mu.Lock()
		s.by[p.Installation] = append(s.by[p.Installation], passSpan{p, time.Now()})
		s.mu.Unlock()
		next(p)
	}
}

// TestAppModeReplicasSplitTheShardsAndNeverSweepAnInstallationTogether
// pins the group's promise per installation: two replicas, then three
// (one joins, shards move to it), then two (one stops, its shards are
// taken over), each hold shards while running and sweep their
// installations; one installation's passes never overlap, whoever makes
// them; and every installation is swept again after the moves.
func TestAppModeReplicasSplitTheShardsAndNeverSweepAnInstallationTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, n, shards = time.Minute, 8, 8
		// GitHub's latency: a pass takes seconds, so a term that ended
		// before its passes did would show.
		c, next := newAppCluster(t, n, true, forgesim.WithLatency(forgesim.GitHubLatency()))
		rec := &spans{by: map[int64][]passSpan{}}
		record := func(cfg *server.Config) { cfg.OnSweep = rec.onSweep(cfg.OnSweep) }
		startAppReplicas(t, c, next, 2, interval, shards, record)
		time.Sleep(10 * interval)
		startAppReplicas(t, c, next, 1, interval, shards, record)
		time.Sleep(10 * interval)
		synctest.Wait()
		c.replicas[0].stop()
		stopped := time.Now()
		time.Sleep(10 * interval)
		synctest.Wait()
		for _, r := range c.replicas[1:] {
			r.stop()
		}

		owners := map[string]bool{}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id := int64(1); id <= n; id++ {
			list := rec.by[id]
			for i := 1; i < len(list); i++ {
				prev, cur := list[i-1], list[i]
				if cur.p.At.Before(prev.end) {
					t.Errorf("installation %d: a pass by %s began at %v, before the pass by %s ended at %v: one installation is swept by one replica at a time",
						id, cur.p.Owner, cur.p.At, prev.p.Owner, prev.end)
				}
			}
			swept := false
			for _, s := range list {
				owners[s.p.Owner] = true
				swept = swept || s.p.At.After(stopped.Add(5*interval))
			}
			if !swept {
				t.Errorf("installation %d: no pass in the last 5 intervals after replica-1 stopped, want its shard taken over", id)
			}
		}
		if len(owners) != 3 {
			t.Errorf("replicas that swept: %v, want all three: the shards are spread", owners)
		}
	})
}

// failingInstallation answers 502 to every GraphQL query of installation
// id's tokens, as a forge failing for one organization does, or with hang
// never answers them (until the request is cancelled), and passes
// everything else to next.
type failingInstallation struct {
	next http.RoundTripper
	id   int64
	hang bool
}

func (f failingInstallation) RoundTrip(req *http.Request) (*http.Response, error) {
	_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if installationTokenOf(tok) != f.id || !strings.HasSuffix(req.URL.Path, "/graphql") {
		return f.next.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	if f.hang {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader("<html>502 Bad Gateway</html>")), Request: req}, nil
}

// TestAppModeAFailingInstallationDoesNotStopItsShard pins that one
// installation's failures are its own: while every GraphQL answer of
// installation 2 is a 502, its passes fail and back off, and the other
// installations of its shard are swept every interval, in the one shard
// term that started, which never ends for it.
func TestAppModeAFailingInstallationDoesNotStopItsShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 3, true)
		startAppReplicas(t, c, failingInstallation{next: next, id: 2}, 1, interval, 1, nil)
		time.Sleep(12*interval + time.Second)
		synctest.Wait()
		c.replicas[0].stop()

		for _, id := range []int64{1, 3} {
			complete := 0
			for _, p := range sweptBy(c, id) {
				if p.Complete {
					complete++
				}
			}
			if complete < 10 {
				t.Errorf("installation %d: %d complete passes in 12 intervals, want one an interval (at least 10): a failing installation does not starve its shard", id, complete)
			}
		}
		bad := sweptBy(c, 2)
		for _, p := range bad {
			if p.Complete {
				t.Errorf("installation 2: pass %+v complete, want none: every read of it failed", p)
			}
		}
		if len(bad) == 0 || len(bad) > 6 {
			t.Errorf("installation 2: %d passes in 12 intervals, want some, backing off (2, 4, 8 intervals apart)", len(bad))
		}
		if terms := shardTerms(c); len(terms) != 1 {
			t.Errorf("shard terms %d, want the one: a failing installation does not end its shard's term", len(terms))
		}
		if got := requestsBy(c.sim, 3, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("installation 3: %d statuses written, want 1", got)
		}
	})
}

// TestAppModeAHangingInstallationIsParkedAlone pins the watchdog's rule
// per installation (docs/design.md): while installation 2's forge never
// answers, each of its passes is cut at the interval, and after
// stallPasses (3) of them in a row it is parked for 3 intervals, counted
// in iterion_net_stalls_total, then tried again; the other installations
// of its shard are swept every interval, in the one shard term.
func TestAppModeAHangingInstallationIsParkedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		c, next := newAppCluster(t, 3, true)
		startAppReplicas(t, c, failingInstallation{next: next, id: 2, hang: true}, 1, interval, 1, nil)
		time.Sleep(14*interval + time.Second)
		synctest.Wait()
		r := c.replicas[0]
		stalls, timeouts := metricValue(t, r.handler, "iterion_net_stalls_total"), metricValue(t, r.handler, "iterion_net_pass_timeouts_total")
		r.stop()

		for _, id := range []int64{1, 3} {
			if n := len(sweptBy(c, id)); n < 12 {
				t.Errorf("installation %d: %d passes in 14 intervals, want one an interval: a hanging installation does not hold its shard up", id, n)
			}
		}
		if stalls < 1 || timeouts < 3 {
			t.Errorf("stalls %v, pass timeouts %v; want installation 2 parked at least once after 3 timed-out passes", stalls, timeouts)
		}
		if n := len(sweptBy(c, 2)); n < 3 || n > 9 {
			t.Errorf("installation 2: %d passes in 14 intervals, want 3 in a row, then none for 3 intervals while parked, then again", n)
		}
		if terms := shardTerms(c); len(terms) != 1 {
			t.Errorf("shard terms %d, want the one: a parked installation does not end its shard's term", len(terms))
		}
	})
}

// TestAppModeBoardSyncsEachRepositoryThroughItsInstallation pins the
// board group in App mode: each board repository is synced by the shard of
// the installation that covers it, through that installation's client (the
// simulator refuses a token whose installation does not cover the
// repository, and refuses none), and a repository no installation covers
// is left out without stopping the others.
func TestAppModeBoardSyncsEachRepositoryThroughItsInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 3, false)
		if err := c.sim.AddInstallationRepos(1, "org-1/repo-2"); err != nil { // installation 1 covers two board repositories
			t.Fatal(err)
		}
		seedIssues(t, "org-1/repo-1#5", "org-1/repo-2#8", "org-3/repo-1#6", "acme/none#7")(c.sim)
		cards := board.NewMemoryStore()
		startAppReplicas(t, c, next, 1, time.Minute, 4, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval = cards, []string{"org-1/repo-1", "org-1/repo-2", "org-3/repo-1", "acme/none"}, time.Minute
		})
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		c.replicas[0].stop()

		got, err := cards.Cards(context.Background(), board.Query{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var repos []string
		for _, card := range got {
			repos = append(repos, card.Repo)
		}
		slices.Sort(repos)
		if repos = slices.Compact(repos); !slices.Equal(repos, []string{"org-1/repo-1", "org-1/repo-2", "org-3/repo-1"}) {
			t.Errorf("cards of %v, want org-1/repo-1, org-1/repo-2 and org-3/repo-1: each covered board repository is synced, every one of an installation covering several, the uncovered one left out", repos)
		}
		for _, id := range []int64{1, 3} {
			if n := requestsBy(c.sim, id, issuesRoute, http.StatusOK); n == 0 {
				t.Errorf("installation %d: no issue list with its tokens, want its repository listed through its client", id)
			}
		}
		for _, rc := range c.sim.Stats().Requests {
			if installationTokenOf(rc.Token) != 0 && rc.Status >= 400 {
				t.Errorf("simulator answered %d %s to token %s %d times, want no refusal", rc.Status, rc.Route, rc.Token, rc.Count)
			}
		}
	})
}

// TestAppModeBoardPageNamesTheReplicasHoldingItsShards pins GET /board's
// sync line in App mode, where the shards of the lease group
// forge-board-sync, not one lease, elect who syncs: three replicas sharing
// two shards each name the two holding them, sorted, with the shards held,
// and say whether they are among them; "nobody syncs" only once no shard
// is held, when every replica has stopped and released its shards.
func TestAppModeBoardPageNamesTheReplicasHoldingItsShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 2
		c, next := newAppCluster(t, 3, false)
		seedIssues(t, "org-1/repo-1#5", "org-2/repo-1#6")(c.sim)
		startAppReplicas(t, c, next, 3, time.Minute, shards, func(cfg *server.Config) {
			cfg.Board, cfg.BoardRepos, cfg.BoardInterval = board.NewMemoryStore(), []string{"org-1/repo-1", "org-2/repo-1"}, time.Minute
		})
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()

		hs, err := c.leases.Holders(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var holders []string
		for _, h := range hs {
			for i := range shards {
				if h.Name == lease.ShardName(server.ForgeBoardSync().Name, shards, i) && time.Now().Before(h.Expires) {
					holders = append(holders, h.Owner)
				}
			}
		}
		slices.Sort(holders)
		if len(holders) != shards || holders[0] == holders[1] {
			t.Fatalf("board shards held by %v, want two replicas one each: at most ceil(2/3) shards a member", holders)
		}
		for _, r := range c.replicas {
			code, line := boardSyncLine(r.handler)
			want := "Synced by <code>" + holders[0] + "</code>, <code>" + holders[1] + "</code> · 2 of 2 shards held"
			if slices.Contains(holders, r.owner) {
				want = strings.Replace(want, " · ", " (this replica among them) · ", 1)
			}
			if code != http.StatusOK || !strings.Contains(line, want) {
				t.Errorf("%s: GET /board = %d, sync line %q; want 200 with %q: the page names the replicas holding the group's shards, and whether it is one", r.owner, code, line, want)
			}
		}

		for _, r := range c.replicas {
			r.stop()
		}
		for _, r := range c.replicas {
			if _, line := boardSyncLine(r.handler); !strings.Contains(line, "nobody syncs now") {
				t.Errorf("%s: GET /board sync line %q after every replica stopped, want \"nobody syncs now\": no shard is held", r.owner, line)
			}
		}
	})
}

// TestAppModeRunsFollowTheirRepositoryToAnotherInstallation pins that the
// unsettled runs of a repository an installation_repositories event adds
// to an installation move to it: the run stored under installation 1
// (or under none, before App mode) is then swept through installation 2's
// token; one already the installation's is not moved again.
func TestAppModeRunsFollowTheirRepositoryToAnotherInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		run := appRun(1)
		if _, err := c.runs.Put(context.Background(), run, time.Now()); err != nil {
			t.Fatal(err)
		}
		if body := addRepo(t, c, r, 2, run.Repo); !strings.Contains(body, `"runs_moved":1`) {
			t.Fatalf("installation_repositories added: %s, want one run moved", body)
		}
		if got, err := c.runs.Get(context.Background(), run.ID); err != nil || got.Installation != 2 {
			t.Errorf("run after its repository moved: %+v, %v; want installation 2", got, err)
		}
		// Another event adding the repository (with one more): its run is
		// installation 2's already, and is neither moved nor counted.
		if err := c.sim.AddInstallationRepos(2, run.Repo, "org-2/extra"); err != nil {
			t.Fatal(err)
		}
		again := fmt.Sprintf(`{"action":"added","installation":{"id":2,"account":{"login":"org-2"}},"repository_selection":"selected",`+
			`"repositories_added":[{"full_name":%q},{"full_name":"org-2/extra"}],"repositories_removed":[]}`, run.Repo)
		if code, body := r.call(t, "POST", "/webhooks/github", "installation_repositories", again); code != http.StatusOK || !strings.Contains(body, `"runs_moved":0`) {
			t.Errorf("installation_repositories adding the repository again: %d %s, want 200 with no run moved: its run is the installation's already", code, body)
		}
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if got := requestsBy(c.sim, 2, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("statuses written with installation 2's tokens: %d, want 1: the moved run is swept through its new installation", got)
		}
	})
}

// TestAppModeRunsOfARepositoryAddedAreMovedPastOnePage pins that an
// installation_repositories event moves every unsettled run of the
// repository it adds, page after page of server.DefaultRunsLimit, not
// only the first page: a run left under the old installation is swept by
// no shard once that installation no longer covers its repository.
func TestAppModeRunsOfARepositoryAddedAreMovedPastOnePage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		n := server.DefaultRunsLimit + 1
		ids := make([]string, 0, n)
		for pull := 1; pull <= n; pull++ {
			run := appRun(1)
			run.Pull, run.HeadSHA = pull, fmt.Sprintf("sha-1-%d", pull)
			run.ID = gaterun.ID(run.Host, run.Repo, run.Pull, run.HeadSHA)
			if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, run.ID)
		}
		if body := addRepo(t, c, r, 2, appRepo(1)); !strings.Contains(body, fmt.Sprintf(`"runs_moved":%d`, n)) {
			t.Errorf("installation_repositories added with %d unsettled runs: %s, want all %d moved: moveRuns pages through them", n, body, n)
		}
		for _, id := range ids {
			if got, err := c.runs.Get(ctx, id); err != nil || got.Installation != 2 {
				t.Errorf("run %s: installation %d (%v), want 2: every run of the repository follows it, past the first page", id, got.Installation, err)
			}
		}
	})
}

// TestAppModeRunsFollowTheirRepositoryWhenItsWebhookIsLost pins that a
// run left under an installation that lost its repository, because the
// installation_repositories webhook saying so never reached the
// deployment (GitHub does not send a failed delivery again), is not left
// there for ever: installation 1's token can no longer read org-1/repo-1
// (NOT_FOUND), so its sweeper asks GitHub which installation covers the
// repository now, moves the run to installation 2 (counted in
// merge_gate_runs_rehomed_total), and installation 2's sweeper publishes
// its verdict. A repository still covered by installation 1 is left alone.
func TestAppModeRunsFollowTheirRepositoryWhenItsWebhookIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 3, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		if err := r.app.Relist(ctx); err != nil { // the App client knows installations 1, 2 and 3
			t.Fatal(err)
		}
		moved, stays := appRun(1), appRun(3)
		for _, run := range []gaterun.Run{moved, stays} {
			if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		// The repository moves to installation 2; no webhook is sent (the
		// simulator has none configured), as if the delivery had failed.
		if err := c.sim.AddInstallationRepos(2, moved.Repo); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4*time.Minute + time.Second)
		synctest.Wait()
		if got, err := c.runs.Get(ctx, moved.ID); err != nil || got.Installation != 2 {
			t.Errorf("run of the moved repository: installation %d (%v); want 2: a run its installation cannot read follows its repository", got.Installation, err)
		}
		if got := requestsBy(c.sim, 2, statusRoute, http.StatusCreated); got != 1 {
			t.Errorf("statuses written with installation 2's tokens: %d, want 1: the moved run's verdict is published through the installation covering it", got)
		}
		if got, err := c.runs.Get(ctx, stays.ID); err != nil || got.Installation != 3 {
			t.Errorf("run of a repository its installation still covers: installation %d (%v); want 3", got.Installation, err)
		}
		if got := metricValue(t, r.handler, "merge_gate_runs_rehomed_total"); got != 1 {
			t.Errorf("merge_gate_runs_rehomed_total = %v, want 1", got)
		}
	})
}

// TestAppModeRunsOfARepositoryNoInstallationCoversAnyMoreCountUncovered
// pins that a run stored under an installation the App knows, whose
// repository that installation lost while no other gained it, is counted
// in merge_gate_runs_uncovered (found_by="sweeper") and so seen by
// IterionRunsUncovered: installation 1's token can no longer read
// org-1/repo-1, and GitHub says no installation covers it, so no sweep can
// publish the run's verdict. The installation's sweeper says so in the log
// once for the run, not at each of its back-off's look-ups, and counts it
// no more once the run is moved to an installation covering its
// repository again.
func TestAppModeRunsOfARepositoryNoInstallationCoversAnyMoreCountUncovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		logger, logs := textLogger()
		startAppReplicas(t, c, next, 1, time.Minute, 4, func(cfg *server.Config) { cfg.Logger = logger })
		r := c.replicas[0]
		defer r.stop()
		if err := r.app.Relist(ctx); err != nil { // the App client knows installations 1 and 2
			t.Fatal(err)
		}
		run := appRun(1)
		if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
			t.Fatal(err)
		}
		// The App is removed from the repository; no webhook is sent (the
		// simulator has none configured), as if the delivery had failed.
		if err := c.sim.RemoveInstallationRepos(1, run.Repo); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if got := uncoveredGauge(t, c); got != 1 {
			t.Errorf("merge_gate_runs_uncovered after the first pass: %v, want 1: a run no installation's token can read is no shard's to sweep", got)
		}
		// Its back-off looks the repository up again at 2, 4, 8 ... 30
		// intervals: about 6 look-ups in two hours.
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got := uncoveredGauge(t, c); got != 1 {
			t.Errorf("merge_gate_runs_uncovered two hours on: %v, want 1", got)
		}
		if got := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"}); got < 3 {
			t.Fatalf("look-ups of %s's installation: %d, want 3 or more: the back-off looks it up again", run.Repo, got)
		}
		if got := strings.Count(logs.String(), "no installation of the App covers the repository of an unsettled run"); got != 1 {
			t.Errorf("log lines naming the uncovered run: %d, want 1: once per run, not per look-up", got)
		}
		if got, err := c.runs.Get(ctx, run.ID); err != nil || got.Installation != 1 || got.Settled {
			t.Errorf("the uncovered run: installation %d settled %v (%v); want left unsettled under installation 1", got.Installation, got.Settled, err)
		}
		if got := runsUncovered(t, r, 1); got != 1 {
			t.Errorf("/api/installations: installation 1's runs_uncovered = %d, want 1: the view shows the runs no installation covers", got)
		}
		if _, page := r.call(t, "GET", "/installations?sort=id", "", ""); !strings.Contains(page, "(1 uncovered)") || !strings.Contains(page, "1 of them under a repository no installation of the App covers") {
			t.Errorf("/installations does not show installation 1's uncovered run:\n%s", page)
		}
		// The App is installed on the repository again, under installation
		// 2, and again no webhook says so: the next look-up, within a
		// back-off's longest (30 intervals) and a deep window's start,
		// moves the run.
		if err := c.sim.AddInstallationRepos(2, run.Repo); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got, err := c.runs.Get(ctx, run.ID); err != nil || got.Installation != 2 {
			t.Errorf("the run once installation 2 covers its repository: installation %d (%v); want 2", got.Installation, err)
		}
		if got := uncoveredGauge(t, c); got != 0 {
			t.Errorf("merge_gate_runs_uncovered once the run moved: %v, want 0", got)
		}
		if got := runsUncovered(t, r, 1); got != 0 {
			t.Errorf("/api/installations once the run moved: installation 1's runs_uncovered = %d, want 0", got)
		}
	})
}

// TestAppModeSweepersForgetTheBackOffsOfRunsNoLongerTheirs pins that an
// installation's sweeper keeps a run's back-off only while the run is
// listed unsettled under that installation: of three runs of installation
// 1 whose pull requests its token cannot read (no such pull request; the
// look-up says installation 1 still covers the repository, so none is
// moved), one is settled and one moved to installation 2 with its
// repository (as the installation_repositories webhook would), where its
// pull request is read. From the next pass of installation 1, whose
// snapshot of unsettled runs no longer lists them, long before a deep
// window, merge_gate_runs_backing_off counts the third alone, and
// installation 1's term holds no other back-off (the gauge sums the
// terms' back-offs); the third keeps its back-off.
func TestAppModeSweepersForgetTheBackOffsOfRunsNoLongerTheirs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		if err := c.sim.AddInstallationRepos(1, "org-1/repo-2"); err != nil {
			t.Fatal(err)
		}
		if err := r.app.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		runOf := func(repo string, pull int) gaterun.Run {
			run := appRun(1)
			run.Repo, run.Pull, run.HeadSHA = repo, pull, fmt.Sprintf("sha-%d", pull)
			run.ID = gaterun.ID(run.Host, run.Repo, run.Pull, run.HeadSHA)
			return run
		}
		settles, moves, stays := runOf("org-1/repo-1", 7), runOf("org-1/repo-2", 8), runOf("org-1/repo-1", 9)
		for _, run := range []gaterun.Run{settles, moves, stays} { // no such pull requests on the forge
			if _, err := c.runs.Put(ctx, run, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if got := metricValue(t, r.handler, "merge_gate_runs_backing_off"); got != 3 {
			t.Fatalf("merge_gate_runs_backing_off after the first pass: %v, want 3", got)
		}
		settleRun(t, c.runs, settles.ID)
		if err := c.sim.AddInstallationRepos(2, moves.Repo); err != nil {
			t.Fatal(err)
		}
		if err := c.sim.SeedPull("org-1", "repo-2", moves.Pull, moves.HeadSHA, "open"); err != nil {
			t.Fatal(err)
		}
		if moved, err := c.runs.Move(ctx, moves.ID, 1, 2, time.Now()); err != nil || !moved {
			t.Fatalf("Move = %v, %v; want the run moved", moved, err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := metricValue(t, r.handler, "merge_gate_runs_backing_off"); got != 1 {
			t.Errorf("merge_gate_runs_backing_off two passes on: %v, want 1: the settled run is no sweeper's, the moved one installation 2's, which reads it", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := metricValue(t, r.handler, "merge_gate_runs_backing_off"); got != 1 {
			t.Errorf("merge_gate_runs_backing_off an hour on: %v, want 1: the run still unreadable, alone, keeps its back-off", got)
		}
		if got := requestsBy(c.sim, 2, "", 0); got == 0 {
			t.Errorf("installation 2's requests: %d, want some: its sweeper offers the moved run", got)
		}
	})
}

// TestAppModeAKilledReplicasLeasesOfTheOldShardCountEndTheChangeOnceExpired
// pins what is left when a replica serving merge-gate-sweeper with the old
// shard count is killed during a change of --sweep-shards (its member and
// shard leases neither renewed nor released): lease_group_other_members,
// and with it IterionShardCountChangeStuck, counts only live owners, so
// it is 1 while the killed replica's leases run and 0 once they expired,
// never for ever; and /leases shows the old count's expired leases as
// what they are, a group nobody serves, not as a group of 0 live members
// whose every shard is unheld.
func TestAppModeAKilledReplicasLeasesOfTheOldShardCountEndTheChangeOnceExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		name, ttl := server.MergeGateSweeper().Name, server.MergeGateSweeper().TTL(time.Minute)
		killed := []string{lease.MemberName(name, 4, "killed")} // as a replica on 4 shards leaves them when killed
		for i := range 4 {
			killed = append(killed, lease.ShardName(name, 4, i))
		}
		for _, l := range killed {
			if ok, err := c.leases.Acquire(ctx, l, "killed", time.Now(), ttl); err != nil || !ok {
				t.Fatalf("Acquire(%s) = %v, %v", l, ok, err)
			}
		}
		startAppReplicas(t, c, next, 1, time.Minute, 2, nil)
		r := c.replicas[0]
		defer r.stop()
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if got := metricValue(t, r.handler, "lease_group_other_members"); got != 1 {
			t.Errorf("lease_group_other_members while the killed replica's leases run: %v, want 1", got)
		}
		time.Sleep(ttl + 2*time.Minute) // its leases expire; the next survey sees it
		synctest.Wait()
		if got := metricValue(t, r.handler, "lease_group_other_members"); got != 0 {
			t.Errorf("lease_group_other_members once the killed replica's leases expired: %v, want 0: an expired member serves nothing, and the alert on it must not fire for ever", got)
		}
		_, page := r.call(t, "GET", "/leases", "", "")
		for _, want := range []string{name + ": 4 shards, nobody serves it", "its 5 leases expired without being released"} {
			if !strings.Contains(page, want) {
				t.Errorf("/leases lacks %q: the old shard count's expired leases show as a group nobody serves:\n%s", want, page)
			}
		}
		for _, unwanted := range []string{name + ": 4 shards, 0 live members", "A change of the shard count is under way"} {
			if strings.Contains(page, unwanted) {
				t.Errorf("/leases says %q: an expired group is neither a group of 0 live members nor a change under way:\n%s", unwanted, page)
			}
		}
		if !strings.Contains(page, name+": 2 shards, 1 live member") {
			t.Errorf("/leases lacks the group's own shard count:\n%s", page)
		}
	})
}

// unreadBack is a run store whose Get fails for the runs of failing (by
// ID): the reconciler's re-read before a write fails for them, so each of
// their offers fails, after the forge read, as a store that cannot read
// them back would make it.
type unreadBack struct {
	gaterun.Store
	failing map[string]bool
}

func (u unreadBack) Get(ctx context.Context, id string) (gaterun.Run, error) {
	if u.failing[id] {
		return gaterun.Run{}, fmt.Errorf("run %s: %w", id, context.DeadlineExceeded)
	}
	return u.Store.Get(ctx, id)
}

// TestAppModeSweepersForgetTheFailedDeepRunsNoLongerTheirs pins that an
// installation's sweeper offers a deep-window run whose offer failed again
// only while its snapshot of unsettled runs lists it: once the run is
// settled, it is offered no more from the installation's next pass, as
// its back-off would be dropped, while a run still failing is offered
// again every pass.
func TestAppModeSweepersForgetTheFailedDeepRunsNoLongerTheirs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		runOf := func(pull int) gaterun.Run {
			run := appRun(1)
			run.Pull, run.HeadSHA = pull, fmt.Sprintf("sha-%d", pull)
			run.ID = gaterun.ID(run.Host, run.Repo, run.Pull, run.HeadSHA)
			return run
		}
		settles, stays := runOf(7), runOf(8)
		for _, run := range []gaterun.Run{settles, stays} { // open, their statuses unpublished: each offer re-reads the run to write
			if err := c.sim.SeedPull("org-1", "repo-1", run.Pull, run.HeadSHA, "open"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.runs.Put(ctx, run, time.Now().Add(-2*time.Hour)); err != nil { // in the deep window alone
				t.Fatal(err)
			}
		}
		startAppReplicas(t, c, next, 1, time.Minute, 4, func(cfg *server.Config) {
			cfg.Runs = unreadBack{Store: c.runs, failing: map[string]bool{settles.ID: true, stays.ID: true}}
		})
		defer c.replicas[0].stop()
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		passes := sweptBy(c, 1)
		if len(passes) != 1 || !passes[0].Deep || passes[0].Offered != 2 {
			t.Fatalf("installation 1's passes after a minute: %+v, want one deep pass offering the 2 runs", passes)
		}
		settleRun(t, c.runs, settles.ID)
		time.Sleep(9 * time.Minute)
		synctest.Wait()
		passes = sweptBy(c, 1)
		if len(passes) < 10 {
			t.Fatalf("installation 1 swept %d times in 10 minutes, want 10", len(passes))
		}
		for _, p := range passes[2:] {
			if p.Offered != 1 {
				t.Errorf("installation 1's pass %d offered %d runs, want 1: the run still failing is offered again every pass, the one settled no more once the snapshot no longer lists it", p.Pass, p.Offered)
			}
		}
	})
}

// runsUncovered is installation id's runs_uncovered in r's
// /api/installations.
func runsUncovered(t *testing.T, r *replica, id int64) int {
	t.Helper()
	v, ok := installationView(t, r, id)
	if !ok {
		t.Fatalf("%s: GET /api/installations lists no installation %d", r.owner, id)
	}
	return v.RunsUncovered
}

// installationView is installation id's row in r's /api/installations;
// ok is false when it lists none.
func installationView(t *testing.T, r *replica, id int64) (v server.InstallationView, ok bool) {
	t.Helper()
	code, body := r.call(t, "GET", "/api/installations?sort=id", "", "")
	var page server.Installations
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil {
		t.Fatalf("%s: GET /api/installations = %d %v: %s", r.owner, code, err, body)
	}
	i := slices.IndexFunc(page.Installations, func(v server.InstallationView) bool { return v.ID == id })
	if i < 0 {
		return v, false
	}
	return page.Installations[i], true
}

// TestAppModeMovingRunsKeepsAVerdictReportedMeanwhile pins that moving a
// repository's runs to the installation an installation_repositories event
// adds it to writes nothing from the copy it listed: a verdict reported
// between the listing and the move (POST /api/runs) stands, under the new
// installation.
func TestAppModeMovingRunsKeepsAVerdictReportedMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		run := appRun(1) // success, installation 1
		store := &racedStore{MemoryStore: c.runs, id: run.ID, land: func() { newerVerdict(t, c.runs, run) }}
		startAppReplicas(t, c, next, 1, time.Minute, 4, func(cfg *server.Config) { cfg.Runs = store })
		r := c.replicas[0]
		defer r.stop()
		if _, err := c.runs.Put(context.Background(), run, time.Now()); err != nil {
			t.Fatal(err)
		}
		if body := addRepo(t, c, r, 2, run.Repo); !strings.Contains(body, `"runs_moved":1`) {
			t.Fatalf("installation_repositories added: %s, want one run moved", body)
		}
		got, err := c.runs.Get(context.Background(), run.ID)
		if err != nil || got.Verdict != gaterun.VerdictFailure || got.Installation != 2 {
			t.Errorf("run after the move: verdict %q installation %d (%v); want failure, the verdict reported during the move, under installation 2: a move writes nothing from its listed copy", got.Verdict, got.Installation, err)
		}
	})
}

// TestAppModeANewRunOfAMovedRepositoryTakesItsNewInstallation pins that a
// repository's settled runs never name the installation of its new runs:
// org-1/repo-1 had a run under installation 1, long settled, then moved to
// installation 2 (installation_repositories added, which moves the
// unsettled runs alone). A new run of it is stored under installation 2,
// which covers it now, and its verdict is published; under installation 1,
// whose token GitHub refuses for the repository, it never would be, and
// the adopter leaves the runs of an installation the App knows alone.
func TestAppModeANewRunOfAMovedRepositoryTakesItsNewInstallation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, next := newAppCluster(t, 2, false)
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		r := c.replicas[0]
		defer r.stop()
		if err := r.app.Relist(ctx); err != nil { // the App client knows installations 1 and 2
			t.Fatal(err)
		}
		old := appRun(1)
		if _, err := c.runs.Put(ctx, old, time.Now()); err != nil {
			t.Fatal(err)
		}
		settleRun(t, c.runs, old.ID)
		addRepo(t, c, r, 2, old.Repo)
		sha := strings.Repeat("cd", 20)
		if err := c.sim.SeedPull("org-1", "repo-1", 2, sha, "open"); err != nil {
			t.Fatal(err)
		}
		id := r.postRun(t, old.Repo, 2, sha)
		time.Sleep(40*time.Minute + time.Second) // past a deep pass and the adopter's passes
		synctest.Wait()
		got, err := c.runs.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if posted := requestsBy(c.sim, 2, statusRoute, http.StatusCreated); got.Installation != 2 || posted != 1 {
			t.Errorf("new run of the moved repository: installation %d, statuses written with installation 2's tokens %d; want installation 2 and its status published (1): a settled run's installation is no hint", got.Installation, posted)
		}
	})
}

// TestAppModeARepositoryCostsTheAppOneLookUpAcrossReplicas pins that a
// repository's installation is asked of GitHub once for the deployment,
// not once per replica: a replica that meets a repository another already
// stored an unsettled run of takes the installation from the store.
func TestAppModeARepositoryCostsTheAppOneLookUpAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		startAppReplicas(t, c, next, 3, time.Minute, 4, nil)
		defer c.stopAll()
		// Each replica's App client knows installation 2 before its first
		// run (its own start-up re-list may not have answered yet on a
		// loaded machine): the store's answer is taken only for an
		// installation the client knows.
		for _, r := range c.replicas {
			if err := r.app.Relist(context.Background()); err != nil {
				t.Fatalf("%s: Relist: %v", r.owner, err)
			}
		}
		for pull, r := range c.replicas {
			sha := strings.Repeat(fmt.Sprint(pull+1), 40)
			if err := c.sim.SeedPull("org-2", "repo-1", pull+1, sha, "open"); err != nil { // open at the run's head: the run stays unsettled
				t.Fatal(err)
			}
			r.postRun(t, "org-2/repo-1", pull+1, sha)
		}
		if n := c.sim.Requests(forgesim.Filter{Route: "GET /repos/{owner}/{repo}/installation"}); n != 1 {
			t.Errorf("repository installation look-ups: %d for 3 replicas, want 1: the store tells the others", n)
		}
		runs, err := c.runs.List(context.Background(), gaterun.Query{Installation: 2, Limit: 10})
		if err != nil || len(runs) != 3 {
			t.Errorf("runs of installation 2: %d, %v; want the 3", len(runs), err)
		}
	})
}

// TestAppModeAChangeOfShardCountIsSeenUntilItIsDone pins what an operator
// sees while a rolling update changes --sweep-shards: replica-1 still
// serves merge-gate-sweeper with 4 shards, replica-2 with 2 (each
// installation is swept under both meanwhile). Each replica's
// lease_group_other_members is 1; replica-2 logs, once, that replicas
// serve the group with another shard count, naming replica-1 and its 4;
// its /leases page marks its own count and says a change is under way,
// naming replica-1. Once replica-1 stops, the gauge is 0, the log says
// the change is done, and the page says nothing of a change.
func TestAppModeAChangeOfShardCountIsSeenUntilItIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, next := newAppCluster(t, 2, false)
		logger, logs := textLogger()
		startAppReplicas(t, c, next, 1, time.Minute, 4, nil)
		startAppReplicas(t, c, next, 1, time.Minute, 2, func(cfg *server.Config) { cfg.Logger = logger })
		old, r := c.replicas[0], c.replicas[1]
		defer r.stop()
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		for _, rr := range []*replica{old, r} {
			if got := metricValue(t, rr.handler, "lease_group_other_members"); got != 1 {
				t.Errorf("%s: lease_group_other_members = %v, want 1: one replica serves the group with the other shard count", rr.owner, got)
			}
		}
		const underWay, done = "replicas serve it with another shard count", "no replica serves it with another shard count any more"
		if got := strings.Count(logs.String(), underWay); got != 1 || !strings.Contains(logs.String(), "other_shards=[4] other_owners=[replica-1]") {
			t.Errorf("replica-2's log: %d lines saying the change is under way, want 1 naming replica-1 and its 4 shards:\n%s", got, logs.String())
		}
		_, page := r.call(t, "GET", "/leases", "", "")
		for _, want := range []string{"merge-gate-sweeper: 2 shards, 1 live member, fair share 2 (this replica's shard count)",
			"A change of the shard count is under way: the group is also served with 4 shards, by <code>replica-1</code>"} {
			if !strings.Contains(page, want) {
				t.Errorf("replica-2's /leases lacks %q: it names who serves the other shard count:\n%s", want, page)
			}
		}
		old.stop()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := metricValue(t, r.handler, "lease_group_other_members"); got != 0 {
			t.Errorf("replica-2 once replica-1 stopped: lease_group_other_members = %v, want 0: the change is done", got)
		}
		if !strings.Contains(logs.String(), done) {
			t.Errorf("replica-2's log does not say the change is done once replica-1 stopped:\n%s", logs.String())
		}
		if _, page := r.call(t, "GET", "/leases", "", ""); strings.Contains(page, "A change of the shard count is under way") {
			t.Errorf("replica-2's /leases still says a change is under way once nobody serves the other shard count")
		}
	})
}
