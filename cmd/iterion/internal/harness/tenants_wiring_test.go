package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
)

// TestTenantsWiringIsWhatTheBenchmarksDescribe runs the tenants
// scenario's steps small (4 installations of 2 runs, 3 replicas, churn 2)
// on real processes (dev-mongo, forge-sim, serve) and pins what they hand
// each other, as docs/benchmarks.md ("Many installations") describes the
// run; the measuring rules are pinned in virtual time elsewhere.
//
//   - The simulator: the App installed once per installation, one
//     repository each, the latency model on, GitHub's budgets.
//   - Seeding: the store holds exactly installations × runs open runs,
//     each under its repository's installation, as the server lists them
//     for a sweep, and the simulator each one's pull request at its head
//     (unique to it) with its verdict as the status; the seeding replica,
//     on an interval of an hour, swept nothing and was stopped.
//   - Every replica: App mode on the simulator, the scenario's interval
//     and shards (as serve logged them), the sweep's time budget on (its
//     flags), the webhook secret the simulator and the harness sign with
//     (their webhooks handled, none answered 401).
//   - Churn: installations 5 and 6 added, their installation webhooks
//     (and the removals') handled by the first replica alone, each one's
//     first run posted through its POST /api/runs and the rest written to
//     the store; installations 1 and 3 (spread over the ids) removed; the
//     unknown installation 7 installed on the simulator and its signed
//     webhook answered 202 by the first replica; the last replica killed
//     with SIGKILL.
func TestTenantsWiringIsWhatTheBenchmarksDescribe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // cold builds of both commands included
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	const iv = time.Second
	s := tenantsScenario{installations: 4, runsPer: 2, replicas: []int{3}, churn: 2, shards: 2, logf: t.Logf}
	c, err := s.startCluster(ctx, binaries{iterion: bin, devMongo: devMongo}, filepath.Join(dir, "tenants"), iv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	args := c.simProc.cmd.Args
	for name, want := range map[string]string{"installations": "4", "repos-per-installation": "1", "latency": "true",
		"budget": fmt.Sprint(forgesim.DefaultBudget), "minute": iv.String()} {
		if got, _ := lastFlag(args, name); got != want {
			t.Errorf("forge-sim --%s: got %q, want %q (args %q)", name, got, want, args)
		}
	}

	key, err := writeAppKey(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := s.replicaSpec(key)
	tSeed := time.Now()
	seeder, err := s.seed(ctx, c, spec)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if len(c.replicas) != 0 || seeder == "" {
		t.Errorf("after seeding: got %d replicas running, seeder %q; want the seeding replica named and stopped", len(c.replicas), seeder)
	}
	if got := serveLogged(t, filepath.Join(c.dir, "replica-01.stderr"))["sweep_interval"]; got != time.Hour.String() {
		t.Errorf("the seeding replica's sweep interval: got %v, want 1h: it never sweeps", got)
	}
	log, err := readRequestLog(ctx, c.sim, tSeed.Add(-iv))
	if err != nil {
		t.Fatal(err)
	}
	for id, ss := range sweepsOf(log) {
		for _, sw := range ss {
			if sw.owner == seeder {
				t.Errorf("installation %d swept by the seeding replica at %v: it never sweeps", id, sw.b.First)
			}
		}
	}
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + c.mongoAddr + "/?" + c.mongoQS))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	db := client.Database("iterion")
	store, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := url.Parse(c.sim.url)
	if err != nil {
		t.Fatal(err)
	}
	checkOpenRuns := func(when string, ids ...int64) {
		t.Helper()
		for _, id := range ids {
			runs, err := store.List(ctx, gaterun.Query{Installation: id, State: gaterun.StateUnsettled, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range runs {
				got = append(got, fmt.Sprintf("%s %s#%d %s %s %s", r.Host, r.Repo, r.Pull, r.HeadSHA, r.Context, r.Verdict))
			}
			var want []string
			for _, r := range tenantRuns(id, s.runsPer) {
				want = append(want, fmt.Sprintf("%s %s#%d %s %s %s", simURL.Host, r.Repo, r.Pull, strings.ToLower(r.HeadSHA), gaterun.DefaultContext, r.Verdict))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: installation %d's open runs:\ngot  %q\nwant %q", when, id, got, want)
			}
		}
	}
	// Each run's pull request open on the simulator at its head, with the
	// run's verdict as the head's status, as POST /api/runs would have
	// found them; no two installations' runs share a head.
	heads := map[string]int64{}
	checkOnSim := func(when string, ids ...int64) {
		t.Helper()
		for _, id := range ids {
			for _, r := range tenantRuns(id, s.runsPer) {
				var pr struct {
					State string
					Head  struct{ SHA string }
				}
				if err := c.sim.forgeJSON(ctx, http.MethodGet, fmt.Sprintf("%s/repos/%s/pulls/%d", c.sim.url, r.Repo, r.Pull), nil, &pr); err != nil {
					t.Errorf("%s: %s#%d on the simulator: %v", when, r.Repo, r.Pull, err)
					continue
				}
				state, err := c.sim.statusOf(ctx, r.Repo, r.HeadSHA, gateContext)
				if pr.State != "open" || !strings.EqualFold(pr.Head.SHA, r.HeadSHA) || err != nil || state != r.Verdict {
					t.Errorf("%s: %s#%d on the simulator: %s at %s, status %q (%v); want open at %s, status %q",
						when, r.Repo, r.Pull, pr.State, pr.Head.SHA, state, err, r.HeadSHA, r.Verdict)
				}
				if other, dup := heads[r.HeadSHA]; dup && other != id {
					t.Errorf("%s: installations %d and %d share head %s: each head is unique", when, other, id, r.HeadSHA)
				}
				heads[r.HeadSHA] = id
			}
		}
	}
	checkOpenRuns("seeded", 1, 2, 3, 4)
	checkOnSim("seeded", 1, 2, 3, 4)
	if n, err := db.Collection(gaterun.Collection).CountDocuments(ctx, bson.D{}); err != nil || n != 8 {
		t.Errorf("seeded: got %d runs (%v), want 8: 4 installations × 2", n, err)
	}

	if _, err := s.up(ctx, c, 3, spec); err != nil {
		t.Fatal(err)
	}
	front, middle, victim := c.replicas[0], c.replicas[1], c.replicas[2]
	for _, r := range c.replicas {
		logged := serveLogged(t, r.p.stderrPath())
		for name, want := range map[string]any{"app_mode": true, "sweep_interval": iv.String(), "sweep_shards": 2.0, "forge_host": simURL.Host} {
			if got := logged[name]; got != want {
				t.Errorf("%s logged %s %v, want %v", r.name, name, got, want)
			}
		}
		if got, _ := lastFlag(r.p.(*proc).cmd.Args, "sweep-no-time-budget"); got != "false" {
			t.Errorf("%s: --sweep-no-time-budget is %q, want false: the latency model spends GitHub's time", r.name, got)
		}
	}

	res := TenantsResult{Interval: iv, TTL: c.ttl(), Retry: c.retry()}
	if err := s.disturb(ctx, c, &res, []int64{1, 2, 3, 4}); err != nil {
		t.Fatalf("disturb: %v", err)
	}
	var ins []forgesim.Installation
	if err := doJSON(ctx, c.sim.hc, http.MethodGet, c.sim.url+"/_sim/installations", "", nil, &ins); err != nil {
		t.Fatal(err)
	}
	var installed []int64
	for _, in := range ins {
		installed = append(installed, in.ID)
	}
	if want := []int64{2, 4, 5, 6, 7}; !slices.Equal(installed, want) {
		t.Errorf("installed after the churn: got %v, want %v: 5 and 6 added, 1 and 3 removed, 7 the unknown one", installed, want)
	}
	checkOpenRuns("added", 5, 6)
	checkOnSim("added", 5, 6)
	if res.UnknownStatus != http.StatusAccepted || !res.UnknownAlive {
		t.Errorf("the unknown installation's webhook: got %d, alive %v; want 202 from a live replica", res.UnknownStatus, res.UnknownAlive)
	}
	if err := victim.p.(*proc).waitErr; !killedBy(err, syscall.SIGKILL) {
		t.Errorf("the last replica exited with %v, want killed by SIGKILL", err)
	}
	if slices.Contains(c.replicas, victim) || len(c.replicas) != 2 {
		t.Errorf("got %d replicas left, the victim among them: %v", len(c.replicas), slices.Contains(c.replicas, victim))
	}
	// The webhooks: the churn's 4 installation webhooks, all to the first
	// replica, none refused (one signed with another secret is answered
	// 401, and counted nowhere).
	for _, r := range []*replica{front, middle} {
		fams, err := r.api.metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]int64{}
		for _, m := range fams["webhook_deliveries_total"].GetMetric() {
			outcomes[label(m, "outcome")] += int64(m.GetCounter().GetValue())
		}
		var offers int64
		for _, m := range fams["gate_offers_total"].GetMetric() {
			if label(m, "lane") == forge.LaneAPI {
				offers += int64(m.GetCounter().GetValue())
			}
		}
		handled := total(outcomes) - outcomes[deliveryInvalidOutcome]
		switch {
		case outcomes[deliveryInvalidOutcome] != 0:
			t.Errorf("%s refused %d webhook deliveries as invalid, want none: the simulator's and the harness's webhooks are the server's", r.name, outcomes[deliveryInvalidOutcome])
		case r == front && (handled < 4 || offers != 2):
			t.Errorf("the first replica: got %d webhooks handled %v, %d runs offered through POST /api/runs; want 4 or more, 2: the churn's installation webhooks, each added installation's first run",
				handled, outcomes, offers)
		case r == middle && (handled != 0 || offers != 0):
			t.Errorf("%s: got %d webhooks handled, %d runs posted; want none: they go to the first replica", r.name, handled, offers)
		}
	}
}

// deliveryInvalidOutcome is webhook_deliveries_total's outcome of a
// delivery refused (a bad signature among them).
const deliveryInvalidOutcome = "invalid"

// lastFlag is the value args give flag --name last (as Go's flag package
// keeps the last), "true" for a boolean given alone; ok is false when
// args do not give it.
func lastFlag(args []string, name string) (val string, ok bool) {
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"+name+"="):
			val, ok = strings.TrimPrefix(a, "--"+name+"="), true
		case a == "--"+name:
			val, ok = "true", true
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				val = args[i+1]
			}
		}
	}
	return val, ok
}

// serveLogged is the settings `iterion serve` logged at its start (its
// "iterion serve" line) in the log file at path.
func serveLogged(t *testing.T, path string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "iterion serve" {
			return rec
		}
	}
	t.Fatalf("%s: no \"iterion serve\" line", path)
	return nil
}

// killedBy reports whether a process's exit, err, was by signal sig.
func killedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
