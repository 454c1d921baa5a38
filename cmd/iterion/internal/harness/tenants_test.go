package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/server"
)

// TestTenantsScenario runs the tenants scenario small (40 installations of
// 5 runs, at 1 and 3 replicas) on real processes and asserts its goals
// with margins for the small size and a loaded 2-core machine.
func TestTenantsScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // cold builds of both commands included
	defer cancel()
	dir, bin, devMongo := testBinaries(ctx, t)
	iv := 2 * time.Second // at 1s, a loaded machine's store reads outlive the passes' deadline
	o := Options{
		Bin: bin, DevMongoBin: devMongo, Dir: filepath.Join(dir, "run"),
		TenantsInstallations: 40, TenantsRuns: 5, TenantsReplicas: []int{1, 3},
		TenantsInterval: iv, TenantsWindow: 4, TenantsChurn: 3, TenantsShards: 16,
		Scenarios: []string{ScenarioTenants},
		Progress:  testWriter{t},
	}
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Log("\n" + rep.Markdown("go test ./cmd/iterion/internal/harness -run TestTenantsScenario"))
	r := rep.Tenants
	if r == nil || len(r.Rows) != 2 {
		t.Fatalf("got %+v, want a row at 1 and at 3 replicas", r)
	}
	for _, row := range r.Rows {
		if !row.Settled {
			t.Errorf("N=%d: did not settle, want every installation swept by one replica, the same two intervals running", row.Replicas)
		}
		if row.Installations != o.TenantsInstallations {
			t.Errorf("N=%d: got %d installations swept in the window, want all %d", row.Replicas, row.Installations, o.TenantsInstallations)
		}
		// The goal is 1.5 intervals; one more of slack for a loaded machine.
		if row.LongestGap > 5*iv/2 {
			t.Errorf("N=%d: got installation %d unswept for %v, want at most %v: every installation is swept every interval",
				row.Replicas, row.GapInstallation, row.LongestGap, 5*iv/2)
		}
	}
	hi := r.Rows[1]
	if hi.Sweepers != 3 {
		t.Errorf("N=3: got %d replicas sweeping, want 3: every replica holds shards", hi.Sweepers)
	}
	// 40 installations on 16 shards are lumpy; the goal, 1.3 × the mean,
	// is for 1,000.
	if hi.Balance > 2 {
		t.Errorf("N=3: got the busiest replica at %.2f × the mean, want at most 2: the installations are spread", hi.Balance)
	}
	if r.Ratio <= 0 || r.Ratio > 1.25 {
		t.Errorf("got N=3 ÷ N=1 requests per installation %.3f, want at most 1.25: each installation's cost is one replica's", r.Ratio)
	}
	if r.Overlaps != 0 {
		t.Errorf("got %d overlaps (longest %v), want 0: one replica sweeps an installation at a time", r.Overlaps, r.LongestOverlap)
	}
	if r.Behind != 0 {
		t.Errorf("got merge_gate_sweep_behind %.0f at the end, want 0: the sweep keeps up", r.Behind)
	}
	if r.KilledInstallations == 0 || r.KillSwept != r.KilledInstallations || r.KillAfter > r.killBound()+iv {
		t.Errorf("kill -9: got %d of %d installations swept again, slowest %v, want all within %v (TTL + retry + one tick, + one interval of slack)",
			r.KillSwept, r.KilledInstallations, r.KillAfter, r.killBound()+iv)
	}
	// The goal is 2 intervals (the report says whether it was met); the news
	// of an add reaches the shard's holder through another replica's lease
	// store list and a re-list, each once an interval, so a loaded machine
	// gets two more of slack here.
	if r.AddedSwept != r.Added || r.AddedAfter > 4*iv {
		t.Errorf("added: got %d of %d swept, slowest %v, want all within %v (2 intervals + two of slack)", r.AddedSwept, r.Added, r.AddedAfter, 4*iv)
	}
	if r.RemovedAfter > 2*iv {
		t.Errorf("removed: got a request %v after a removal, want none after %v (1 interval + one of slack): a removed installation costs nothing", r.RemovedAfter, 2*iv)
	}
	if r.Limited != 0 {
		t.Errorf("got %d rate-limit refusals, want 0: no installation meets a limit", r.Limited)
	}
	if r.UnknownStatus != 202 || r.UnknownLookups == 0 || !r.UnknownAlive {
		t.Errorf("unknown installation's webhook: got %d, %d look-ups, alive %v; want 202, looked up, alive", r.UnknownStatus, r.UnknownLookups, r.UnknownAlive)
	}
}

// TestTenantsGoalsAreNeverMetByAPartialRun pins that bench's report of a
// tenants run that failed part-way meets no goal: the overlaps, the gaps
// and the refusals are counted by later steps, so their zeros there were
// never measured.
func TestTenantsGoalsAreNeverMetByAPartialRun(t *testing.T) {
	iv := 2 * time.Second
	base := TenantsResult{Installations: 40, RunsPer: 5, Interval: iv, TTL: 3 * iv, Retry: iv}
	firstWindow := base
	firstWindow.Rows = []TenantsRow{{Replicas: 1, Settled: true, SettleAfter: 20 * time.Second, Window: 4 * iv,
		Installations: 40, Requests: 160, Sweepers: 1, Balance: 1, LongestGap: iv, GapInstallation: 7}}
	for _, c := range []struct {
		name string
		r    TenantsResult
	}{
		{"failed before any window", base},
		{"failed after N=1's window", firstWindow},
	} {
		for _, g := range c.r.Goals() {
			if g.Met {
				t.Errorf("%s: %q measured %s, reported met; want unmet: its figures were not all measured", c.name, g.Goal, g.Measured)
			}
		}
	}
}

// TestTenantsGoalsAreMetByACompleteRun is the partial run's control: the
// same figures, measured to the end, meet every goal.
func TestTenantsGoalsAreMetByACompleteRun(t *testing.T) {
	iv := 2 * time.Second
	row := func(n int) TenantsRow {
		return TenantsRow{Replicas: n, Settled: true, SettleAfter: 20 * time.Second, Window: 4 * iv,
			Installations: 40, Requests: 160, Sweepers: n, Balance: 1, LongestGap: iv, GapInstallation: 7}
	}
	r := TenantsResult{Installations: 40, RunsPer: 5, Interval: iv, TTL: 3 * iv, Retry: iv,
		Rows: []TenantsRow{row(1), row(3)}, Ratio: 1, RatioP95: 1, RatioMax: 1,
		Added: 3, AddedSwept: 3, AddedAfter: iv, Removed: 3, KilledInstallations: 13, KillSwept: 13, KillAfter: 4 * iv,
		UnknownStatus: 202, UnknownLookups: 2, UnknownAlive: true, Done: true}
	for _, g := range r.Goals() {
		if !g.Met {
			t.Errorf("%q measured %s, reported unmet; want met: a complete run within every bound", g.Goal, g.Measured)
		}
	}
}

// TestTenantsRatioNamesTheReplicaCountsItDivides: the tenants ratio goal
// divides the largest count's requests by the smallest's, which is not 1
// under --tenants-replicas 2,10.
func TestTenantsRatioNamesTheReplicaCountsItDivides(t *testing.T) {
	r := TenantsResult{Rows: []TenantsRow{{Replicas: 2}, {Replicas: 10}}, Ratio: 1}
	want := "requests per installation, N=10 ÷ N=2 ≤ 1.05"
	for _, g := range r.Goals() {
		if strings.HasPrefix(g.Goal, "requests per installation") && g.Goal != want {
			t.Errorf("got goal %q, want %q: the ratio names the counts it divides", g.Goal, want)
		}
	}
}

// completeTenants is a complete tenants run that meets every goal, each
// figure at its goal's bound where it has one: interval 2s, TTL 6s,
// retry 2s, so the kill's bound is 10s and the gap's 3s.
func completeTenants() TenantsResult {
	iv := 2 * time.Second
	row := func(n int) TenantsRow {
		return TenantsRow{Replicas: n, Settled: true, SettleAfter: 20 * time.Second, Window: 4 * iv,
			Installations: 40, Requests: 160, Sweepers: n, Balance: 1.3, LongestGap: iv * 3 / 2, GapInstallation: 7}
	}
	return TenantsResult{Installations: 40, RunsPer: 5, Interval: iv, TTL: 3 * iv, Retry: iv,
		Rows: []TenantsRow{row(1), row(3)}, Ratio: 1.05, RatioP95: 1, RatioMax: 1,
		Added: 3, AddedSwept: 3, AddedAfter: 2 * iv, Removed: 3, RemovedAfter: iv,
		KilledInstallations: 13, KillSwept: 13, KillAfter: 3*iv + iv + iv,
		UnknownStatus: 202, UnknownLookups: 2, UnknownAlive: true, Done: true}
}

// TestTenantsGoalsAreMissedOverEachBound pins each tenants goal's verdict:
// a complete run with every figure at its bound meets every goal (the
// bounds are inclusive), and one figure past its bound, or a count short,
// misses that goal and no other. The verdicts are printed beside the
// published figures; a missed goal reported met would hide a broken
// consequence of ADR-117.
func TestTenantsGoalsAreMissedOverEachBound(t *testing.T) {
	for _, g := range completeTenants().Goals() {
		if !g.Met {
			t.Fatalf("at the bounds: %q measured %s, reported missed; want met: the bounds are inclusive", g.Goal, g.Measured)
		}
	}
	for _, c := range []struct {
		name string
		goal string // the missed goal, by the start of its text
		miss func(r *TenantsResult)
	}{
		{"one overlap", "one replica at a time", func(r *TenantsResult) { r.Overlaps, r.LongestOverlap = 1, time.Millisecond }},
		{"ratio over 1.05", "requests per installation", func(r *TenantsResult) { r.Ratio = 1.051 }},
		{"ratio not measured", "requests per installation", func(r *TenantsResult) { r.Ratio = 0 }},
		{"a replica idle at N=3", "at N=3 every replica sweeps", func(r *TenantsResult) { r.Rows[1].Sweepers = 2 }},
		{"the busiest over 1.3 × the mean", "at N=3 every replica sweeps", func(r *TenantsResult) { r.Rows[1].Balance = 1.31 }},
		{"a gap over 1.5 intervals at N=1", "every installation swept every interval", func(r *TenantsResult) { r.Rows[0].LongestGap += time.Millisecond }},
		{"a gap over 1.5 intervals at N=3", "every installation swept every interval", func(r *TenantsResult) { r.Rows[1].LongestGap += time.Millisecond }},
		{"behind at the end", "every installation swept every interval", func(r *TenantsResult) { r.Behind = 1 }},
		{"a killed installation never swept again", "kill -9", func(r *TenantsResult) { r.KillSwept-- }},
		{"re-swept after the bound", "kill -9", func(r *TenantsResult) { r.KillAfter += time.Millisecond }},
		{"the victim swept nothing", "kill -9", func(r *TenantsResult) { r.KilledInstallations, r.KillSwept, r.KillAfter = 0, 0, 0 }},
		{"an added installation never swept", "an installation added", func(r *TenantsResult) { r.AddedSwept-- }},
		{"an added installation swept late", "an installation added", func(r *TenantsResult) { r.AddedAfter += time.Millisecond }},
		{"none added", "an installation added", func(r *TenantsResult) { r.Added, r.AddedSwept, r.AddedAfter = 0, 0, 0 }},
		{"a removed installation's request late", "a removed installation", func(r *TenantsResult) { r.RemovedAfter += time.Millisecond }},
		{"none removed", "a removed installation", func(r *TenantsResult) { r.Removed, r.RemovedAfter = 0, 0 }},
		{"an installation token refused", "0 rate-limit refusals", func(r *TenantsResult) { r.Limited = 1 }},
		{"the App's JWT refused", "0 rate-limit refusals", func(r *TenantsResult) { r.AppLimited = 1 }},
		{"the unknown webhook answered 200", "a webhook for an unknown installation", func(r *TenantsResult) { r.UnknownStatus = 200 }},
		{"the unknown installation not looked up", "a webhook for an unknown installation", func(r *TenantsResult) { r.UnknownLookups = 0 }},
		{"the replica crashed on it", "a webhook for an unknown installation", func(r *TenantsResult) { r.UnknownAlive = false }},
	} {
		r := completeTenants()
		c.miss(&r)
		for _, g := range r.Goals() {
			if missed := strings.HasPrefix(g.Goal, c.goal); g.Met == missed {
				t.Errorf("%s: %q measured %s, got met %v, want %v: only the goal whose figure is past its bound is missed", c.name, g.Goal, g.Measured, g.Met, !missed)
			}
		}
	}
}

// TestTenantsPerHourIsTheMeanInstallations pins the row's requests per
// installation per compressed hour: the window's requests over its
// installations, scaled from the window to 60 intervals.
func TestTenantsPerHourIsTheMeanInstallations(t *testing.T) {
	iv := 2 * time.Second
	r := TenantsRow{Installations: 40, Requests: 160, Window: 4 * iv}
	if got := r.PerHour(iv); got != 60 {
		t.Errorf("got %.1f requests per installation an hour, want 60: 4 each over 4 intervals, 1 an interval", got)
	}
}

// TestTenantsRatioIsTheLargestCountsOverTheSmallests pins which way the
// tenants ratio divides: the requests per installation at the largest
// replica count over those at the smallest, so a cost that grows with N
// comes out above 1 and misses the goal.
func TestTenantsRatioIsTheLargestCountsOverTheSmallests(t *testing.T) {
	s := tenantsScenario{replicas: []int{1, 3, 10}}
	byN := map[int]map[int64]int64{1: {1: 10, 2: 10}, 3: {1: 11, 2: 11}, 10: {1: 12, 2: 12}}
	if mean, _, _ := s.ratio(byN); mean != 1.2 {
		t.Errorf("got ratio %.3f, want 1.200: N=10's 24 requests over N=1's 20", mean)
	}
}

// logged is one request of a scripted request log: installation id's, by
// owner's sweeper, arriving at at, limited when a rate limit refused it.
type logged struct {
	id      int64
	owner   string
	at      time.Time
	limited bool
}

// requestLog is GET /_sim/installations/requests over the requests of
// script that arrived by now, in buckets of iv from since's on, as the
// simulator keeps them.
func requestLog(script []logged, since, now time.Time, iv time.Duration) forgesim.RequestLog {
	bucketOf := func(t time.Time) time.Time { return time.Unix(0, t.UnixNano()/int64(iv)*int64(iv)).UTC() }
	type key struct {
		id    int64
		owner string
	}
	series := map[key]*forgesim.SenderRequests{}
	var keys []key
	for _, r := range script {
		if r.at.After(now) || (!since.IsZero() && bucketOf(r.at).Before(bucketOf(since))) {
			continue
		}
		k := key{r.id, r.owner}
		sr := series[k]
		if sr == nil {
			sr = &forgesim.SenderRequests{Installation: r.id, Sender: "iterion (" + r.owner + ") lane/" + forge.LaneMergeGateSweeper, Tokens: 1}
			series[k] = sr
			keys = append(keys, k)
		}
		start := bucketOf(r.at)
		if n := len(sr.Buckets); n == 0 || !sr.Buckets[n-1].Start.Equal(start) {
			sr.Buckets = append(sr.Buckets, forgesim.RequestBucket{Start: start, First: r.at})
		}
		b := &sr.Buckets[len(sr.Buckets)-1]
		b.Requests++
		if r.limited {
			b.Limited++
		}
		b.Last = r.at
	}
	log := forgesim.RequestLog{Interval: iv, Now: now}
	for _, k := range keys {
		log.Series = append(log.Series, *series[k])
	}
	return log
}

// sortedByTime sorts a script by arrival, as the simulator logs it.
func sortedByTime(script []logged) []logged {
	slices.SortFunc(script, func(a, b logged) int { return a.at.Compare(b.at) })
	return script
}

// tenantsSteadyScript is a request log of 4 installations and 2
// replicas from start, an interval boundary: installation 1 is swept by
// both in the first two intervals (not settled); from the third on, each
// installation i by one replica once an interval, at (150 + 100 i) ms
// into it, two requests 50 ms apart. Three are refused: in the 4th, the
// 9th and the 12th interval.
func tenantsSteadyScript(start time.Time, iv time.Duration) []logged {
	owners := []string{"owner-1", "owner-2"}
	var script []logged
	for k := range 40 {
		at := start.Add(time.Duration(k) * iv)
		if k < 2 {
			script = append(script, logged{1, owners[0], at.Add(100 * time.Millisecond), false}, logged{1, owners[1], at.Add(200 * time.Millisecond), false})
			continue
		}
		for id := int64(1); id <= 4; id++ {
			first := at.Add(time.Duration(150+100*id) * time.Millisecond)
			limited := (k == 3 && id == 2) || (k == 8 && id == 3) || (k == 11 && id == 1)
			script = append(script, logged{id, owners[(id-1)%2], first, limited}, logged{id, owners[(id-1)%2], first.Add(50 * time.Millisecond), false})
		}
	}
	return sortedByTime(script)
}

// steadyOn runs the tenants scenario's steady for n replicas started
// 300 ms into the first interval of script's start, its log served by a
// scripted simulator, and returns the row, the requests by installation
// and the script's start.
func steadyOn(t *testing.T, n int, iv time.Duration) (TenantsRow, map[int64]int64, time.Time) {
	start := time.Now() // an interval boundary: bubbles start at midnight
	script := tenantsSteadyScript(start, iv)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_sim/installations/requests", func(w http.ResponseWriter, r *http.Request) {
		since, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
		if err != nil {
			t.Errorf("since: %v", err)
		}
		writeJSON(t, w, requestLog(script, since, time.Now(), iv))
	})
	c := &cluster{interval: iv, sim: scriptedSim(mux)}
	s := tenantsScenario{installations: 4, window: 4, logf: t.Logf}
	time.Sleep(300 * time.Millisecond)
	row, per, err := s.steady(t.Context(), c, n, []int64{1, 2, 3, 4}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return row, per, start
}

// TestTenantsSteadyWindowIsWholeIntervalsAfterSettling pins the window a
// tenants row is measured over, in virtual time on a scripted request
// log: the replicas, started off an interval boundary, settle once every
// installation was swept by one replica, the same one, over two
// stretches of settleHalf intervals; the window then starts at the next
// interval boundary and spans the scenario's intervals, whole buckets of
// the log, read a quarter of an interval after its last bucket ended.
// Sweeps and refusals in the buckets before and after it are not the
// window's.
func TestTenantsSteadyWindowIsWholeIntervalsAfterSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 2 * time.Second
		row, per, start := steadyOn(t, 2, iv)
		// Settled at the poll 6 intervals after the replicas' start (its
		// look, the 4 whole intervals from the 3rd, is the first without
		// the unsettled two); the window is then the 8th to the 11th
		// interval: 4 of 4 installations, each 2 requests an interval,
		// 1 of them refused (in the 9th).
		want := TenantsRow{Replicas: 2, Settled: true, SettleAfter: 6 * iv, Window: 4 * iv,
			Installations: 4, Requests: 32, Sweepers: 2, Balance: 1,
			LongestGap: iv - 50*time.Millisecond, GapInstallation: 1, Limited: 1}
		if row != want {
			t.Errorf("got row\n%+v, want\n%+v: the window is the whole intervals from the first boundary after settling", row, want)
		}
		if len(per) != 4 || per[1] != 8 {
			t.Errorf("got requests by installation %v, want 8 each: its 4 intervals of the window", per)
		}
		if got, wantAt := time.Now(), start.Add(11*iv+iv/4); !got.Equal(wantAt) {
			t.Errorf("got the window read %v after the start, want %v: a quarter of an interval after its last bucket ended", got.Sub(start), wantAt.Sub(start))
		}
	})
}

// TestTenantsSteadyBalanceIsOverEveryReplica pins the row of replicas
// that never settle, one of 3 sweeping nothing: measured anyway, from
// the interval boundary after the settling deadline, unsettled, and the busiest replica's
// installations over the mean over all 3 replicas, the idle one's
// nothing included (a mean over those sweeping would call 2 of 4 on 2
// of 3 replicas balanced).
func TestTenantsSteadyBalanceIsOverEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 2 * time.Second
		row, _, start := steadyOn(t, 3, iv)
		// The deadline for 4 installations: TTL + 15 intervals + 10 s
		// from the replicas' start, 300 ms into the first interval,
		// polled every interval; the window from the boundary after.
		tUp := start.Add(300 * time.Millisecond)
		polls := (server.MergeGateSweeper().TTL(iv) + 15*iv + 10*time.Second + iv - 1) / iv
		if got, want := time.Now(), alignUp(tUp.Add(polls*iv), iv).Add(4*iv+iv/4); !got.Equal(want) {
			t.Errorf("got the window read %v after the start, want %v: 4 intervals from the boundary after the settling deadline", got.Sub(start), want.Sub(start))
		}
		if row.Settled || row.SettleAfter != 0 || row.Window != 4*iv || row.Requests != 32 {
			t.Errorf("got settled %v after %v, %d requests in %v; want unsettled, measured anyway: 32 requests in 4 intervals", row.Settled, row.SettleAfter, row.Requests, row.Window)
		}
		if row.Sweepers != 2 || row.Balance != 1.5 {
			t.Errorf("got %d sweepers, busiest %.2f × the mean; want 2, 1.50: 2 installations over the mean of 4 over 3 replicas", row.Sweepers, row.Balance)
		}
	})
}

// TestTenantsDisturbMeasuresTheUnknownWebhookAndTheKill pins how the
// tenants scenario's disturbances are measured, in virtual time on a
// scripted simulator and 3 replicas (no churn). The unknown installation
// is added while the simulator's webhooks point nowhere, so that no
// replica is told of it, and they point at the front replica again for
// the signed webhook; its look-ups are the App-JWT requests from just
// before the webhook to two intervals after it, not the App's requests
// before it. The kill is of the last replica, not the front: its
// installations are those it swept in the two intervals before the kill,
// each swept again when another replica's first request of it arrives
// (not the victim's own, still on its way at the kill), measured from the
// kill's signal (not the victim's exit), read once TTL +
// retry + one tick and two intervals more have passed; merge_gate_sweep
// _behind is summed over the replicas left.
func TestTenantsDisturbMeasuresTheUnknownWebhookAndTheKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 2 * time.Second
		start := time.Now()
		var (
			mu        sync.Mutex
			pointedAt string               // where the simulator sends its webhooks
			addedWith = map[int64]string{} // an added installation's webhook URL
			webhookAt time.Time
			victim    *signalled
		)
		res := &TenantsResult{Interval: iv}
		simMux := http.NewServeMux()
		simMux.HandleFunc("POST /_sim/webhook", func(w http.ResponseWriter, r *http.Request) {
			var b struct{ URL string }
			json.NewDecoder(r.Body).Decode(&b)
			mu.Lock()
			pointedAt = b.URL
			mu.Unlock()
		})
		simMux.HandleFunc("POST /_sim/installations", func(w http.ResponseWriter, r *http.Request) {
			var b struct{ ID int64 }
			json.NewDecoder(r.Body).Decode(&b)
			mu.Lock()
			addedWith[b.ID] = pointedAt
			mu.Unlock()
		})
		simMux.HandleFunc("POST /_sim/repos/{owner}/{repo}/pulls", func(w http.ResponseWriter, r *http.Request) {})
		// 10 App-JWT requests before the webhook; 3 look-ups an interval
		// after it.
		simMux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n := int64(10)
			if !webhookAt.IsZero() && !time.Now().Before(webhookAt.Add(iv)) {
				n += 3
			}
			mu.Unlock()
			writeJSON(t, w, simStats{Requests: []simRequests{{Token: "app:1", Route: "POST /app/installations/{id}/access_tokens", Status: 201, Count: n}}})
		})
		// Replicas 1, 2 and 3 sweep installations 1-2, 3-4 and 5-6 once an
		// interval (the victim 6 every other: the last time, a stretch
		// more than an interval before its kill); the victim, which takes
		// 50 ms to exit, has its last requests of 5 and 6 arrive 5 ms
		// after its kill, and replica 2's first of them killBound and
		// killBound + 200 ms after it.
		simMux.HandleFunc("GET /_sim/installations/requests", func(w http.ResponseWriter, r *http.Request) {
			since, _ := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
			_, killed := victim.first()
			if killed.IsZero() {
				killed = start.Add(time.Hour) // not yet
			}
			var script []logged
			for k := range 30 {
				for id := int64(1); id <= 6; id++ {
					at := start.Add(time.Duration(k)*iv + time.Duration(100*id)*time.Millisecond)
					owner := fmt.Sprintf("owner-%d", (id+1)/2)
					if id == 6 && k%2 == 0 && at.Before(killed) {
						continue // the victim sweeps 6 every other interval
					}
					if id >= 5 && !at.Before(killed) {
						owner = "owner-2"
						if at.Before(killed.Add(res.killBound())) {
							continue
						}
					}
					script = append(script, logged{id, owner, at, false})
				}
			}
			script = append(script, logged{5, "owner-3", killed.Add(5 * time.Millisecond), false}, logged{6, "owner-3", killed.Add(5 * time.Millisecond), false},
				logged{5, "owner-2", killed.Add(res.killBound()), false}, logged{6, "owner-2", killed.Add(res.killBound() + 200*time.Millisecond), false})
			writeJSON(t, w, requestLog(sortedByTime(script), since, time.Now(), iv))
		})
		behind := func(n int) http.Handler {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "# TYPE merge_gate_sweep_behind gauge\nmerge_gate_sweep_behind %d\n", n)
			})
			return mux
		}
		frontMux := http.NewServeMux()
		frontMux.Handle("GET /metrics", behind(0))
		frontMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(t, w, map[string]string{"owner": "owner-1"}) })
		frontMux.HandleFunc("POST /webhooks/github", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			webhookAt = time.Now()
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		})
		front, _ := scriptedReplica(t, "replica-01", "owner-1", frontMux)
		pointedAt = webhookURL(front.api) // as the scenario's run left them
		r2, _ := scriptedReplica(t, "replica-02", "owner-2", behind(1))
		r3, p3 := scriptedReplica(t, "replica-03", "owner-3", behind(5))
		p3.exits = 50 * time.Millisecond
		victim = p3
		c := &cluster{interval: iv, sim: scriptedSim(simMux), replicas: []*replica{front, r2, r3}}
		res.TTL, res.Retry = c.ttl(), c.retry()
		s := tenantsScenario{installations: 6, runsPer: 1, logf: t.Logf}
		time.Sleep(5*iv + 300*time.Millisecond) // the replicas have swept for a while
		if err := s.disturb(t.Context(), c, res, []int64{1, 2, 3, 4, 5, 6}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := addedWith[7]; got != "" || pointedAt != webhookURL(front.api) {
			t.Errorf("got installation 7 added with webhooks to %q, and them left to %q; want none, then the front's %q: no replica is told of the unknown installation",
				got, pointedAt, webhookURL(front.api))
		}
		if res.UnknownStatus != http.StatusAccepted || res.UnknownLookups != 3 || !res.UnknownAlive {
			t.Errorf("got the unknown webhook answered %d, %d look-ups, alive %v; want 202, 3 (the App-JWT requests after it), alive", res.UnknownStatus, res.UnknownLookups, res.UnknownAlive)
		}
		sig, killed := p3.first()
		if sig != syscall.SIGKILL || !killed.Equal(webhookAt.Add(2*iv)) {
			t.Errorf("got %v sent to the last replica %v after the webhook, want SIGKILL two intervals after it", sig, killed.Sub(webhookAt))
		}
		if res.KilledInstallations != 2 || res.KillSwept != 2 || res.KillAfter != res.killBound()+200*time.Millisecond {
			t.Errorf("kill: got %d installations, %d swept again, slowest %v; want 2, 2, %v: the victim's, each from the kill to another replica's first request",
				res.KilledInstallations, res.KillSwept, res.KillAfter, res.killBound()+200*time.Millisecond)
		}
		if res.Behind != 1 || len(c.replicas) != 2 {
			t.Errorf("got %d replicas left, behind %v; want 2, behind 1: summed over the replicas left", len(c.replicas), res.Behind)
		}
		if res.Added != 0 || res.Removed != 0 {
			t.Errorf("got %d added and %d removed, want none: no churn", res.Added, res.Removed)
		}
	})
}

// scriptedTenants stands in for the tenants scenario's steps on its
// cluster (tenantsSteps), in virtual time: each step takes the time its
// script gives it, records that it was called, and adds its App-JWT
// refusals to the simulator's count; up starts scripted replicas, named
// by their count and sequence. Its figures are the test's own.
type scriptedTenants struct {
	t        *testing.T
	mu       sync.Mutex
	calls    []string
	appLimit int64                   // App-JWT refusals so far
	procs    map[int][]*signalled    // each count's replicas' processes
	rows     map[int]TenantsRow      // steady's row at each count
	per      map[int]map[int64]int64 // steady's requests by installation
	ids      [][]int64               // the installations each steady was given
	seedEnd  time.Time               // when seed returns
}

func (st *scriptedTenants) call(format string, args ...any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.calls = append(st.calls, fmt.Sprintf(format, args...))
}

func (st *scriptedTenants) refuse(n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.appLimit += n
}

func (st *scriptedTenants) seed(ctx context.Context, c *cluster, spec replicaSpec) (string, error) {
	st.call("seed")
	st.refuse(4)
	time.Sleep(time.Until(st.seedEnd))
	return "seeder", nil
}

// up takes a second, then has n replicas answer.
func (st *scriptedTenants) up(ctx context.Context, c *cluster, n int, spec replicaSpec) (time.Time, error) {
	st.call("up %d with %d running", n, len(c.replicas))
	if n > 1 {
		time.Sleep(time.Second)
	}
	for i := range n {
		name := fmt.Sprintf("n%d-%d", n, i+1)
		r, p := scriptedReplica(st.t, name, name, http.NotFoundHandler())
		c.replicas = append(c.replicas, r)
		st.procs[n] = append(st.procs[n], p)
	}
	return time.Now(), nil
}

// steady takes 6 intervals.
func (st *scriptedTenants) steady(ctx context.Context, c *cluster, n int, ids []int64, tUp time.Time) (TenantsRow, map[int64]int64, error) {
	st.call("steady %d", n)
	st.mu.Lock()
	st.ids = append(st.ids, ids)
	st.mu.Unlock()
	st.refuse(1)
	time.Sleep(6 * c.interval)
	return st.rows[n], st.per[n], nil
}

// sim is a simulator whose request log is script's, read at the
// instant asked, and whose App-JWT refusals are st's so far.
func (st *scriptedTenants) sim(script []logged, iv time.Duration) sim {
	t := st.t
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_sim/installations/requests", func(w http.ResponseWriter, r *http.Request) {
		since, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("since"))
		if err != nil {
			t.Errorf("since: %v", err)
		}
		writeJSON(t, w, requestLog(sortedByTime(slices.Clone(script)), since, time.Now(), iv))
	})
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		n := st.appLimit
		st.mu.Unlock()
		writeJSON(t, w, simStats{Requests: []simRequests{
			{Token: "app:1", Route: "POST /app/installations/{id}/access_tokens", Status: http.StatusTooManyRequests, Count: n},
			{Token: "app:1", Route: "POST /app/installations/{id}/access_tokens", Status: http.StatusCreated, Count: 50},
		}})
	})
	return scriptedSim(mux)
}

// disturb takes 2 intervals.
func (st *scriptedTenants) disturb(ctx context.Context, c *cluster, res *TenantsResult, ids []int64) error {
	st.call("disturb with %d running", len(c.replicas))
	st.refuse(1)
	time.Sleep(2 * c.interval)
	res.Behind = 2
	return nil
}

// TestTenantsRunMeasuresEachCountThenDisturbsTheLargest pins the tenants
// scenario's run, in virtual time, its steps scripted (scriptedTenants)
// and its simulator too: the replica counts in their order, each started
// with none running (the last count's all stopped with SIGTERM, and the
// largest's after it), each row as steady measured it, the disturbances
// only at the largest count, after its row; the ratio of the largest
// count's requests per installation over the smallest's. Overlaps are
// counted over each count's whole run, from the interval its replicas
// answered in (not the one before: the seeding, or the last count) to
// the end of its disturbances, a tenure cut at a pause over the TTL.
// Refusals with an installation's token are counted from the interval
// before seeding began to the end, the seeding replica's told apart by
// sender; the App's JWT's are split at the replicas' start.
func TestTenantsRunMeasuresEachCountThenDisturbsTheLargest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 2 * time.Second
		start := time.Now() // an interval boundary: bubbles start at midnight
		at := func(d time.Duration) time.Time { return start.Add(d) }
		ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
		st := &scriptedTenants{t: t, procs: map[int][]*signalled{}, seedEnd: at(10*time.Second + ms(300)),
			rows: map[int]TenantsRow{1: {Replicas: 1, Settled: true, Requests: 20}, 3: {Replicas: 3, Requests: 23, Sweepers: 3}},
			per:  map[int]map[int64]int64{1: {1: 10, 2: 10}, 3: {1: 11, 2: 12}}}
		// The seeding starts at 4.5 s and ends at 10.3 s; N=1 answers at
		// 10.3 s and runs to 22.3 s; N=3 answers at 23.3 s, is disturbed
		// from 35.3 s and stopped at 39.3 s.
		script := []logged{
			// Overlaps, a tenure of each of a and b sharing a stretch:
			// 100 ms in the interval before N=1's first (during seeding),
			// not counted; 200 ms in N=1's first; 300 ms in N=3's steady
			// state, a's requests 2.5 intervals apart (less than the TTL);
			// 250 ms while N=3 is disturbed.
			{1, "a", at(ms(8400)), false}, {1, "b", at(ms(8500)), false}, {1, "a", at(ms(8600)), false}, {1, "b", at(ms(8700)), false},
			{2, "a", at(ms(10400)), false}, {2, "b", at(ms(10500)), false}, {2, "a", at(ms(10700)), false}, {2, "b", at(ms(10900)), false},
			{3, "a", at(26 * time.Second), false}, {3, "b", at(28 * time.Second), false}, {3, "b", at(ms(28300)), false}, {3, "a", at(31 * time.Second), false},
			{4, "a", at(36 * time.Second), false}, {4, "b", at(ms(36100)), false}, {4, "a", at(ms(36350)), false}, {4, "b", at(ms(36600)), false},
			// Refusals: another sender's in the interval before the one
			// seeding began in, not counted; the seeder's in the interval
			// it began in and in its last, shared with N=1's first; N=1's
			// and N=3's.
			{13, "stray", at(time.Second), true},
			{10, "seeder", at(ms(4700)), true}, {10, "seeder", at(ms(10100)), true},
			{11, "n1-1", at(ms(10500)), true}, {11, "n1-1", at(15 * time.Second), true},
			{12, "n3-1", at(37 * time.Second), true},
		}
		c := &cluster{interval: iv, dir: t.TempDir(), sim: st.sim(script, iv)}
		s := tenantsScenario{installations: 4, runsPer: 2, replicas: []int{1, 3}, shards: 8, logf: t.Logf, steps: st}
		time.Sleep(4*time.Second + ms(500))
		res, err := s.run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if want := []string{"seed", "up 1 with 0 running", "steady 1", "up 3 with 0 running", "steady 3", "disturb with 3 running"}; !slices.Equal(st.calls, want) {
			t.Errorf("got steps %q, want %q: each count in turn on fresh replicas, the largest disturbed after its row", st.calls, want)
		}
		for n, ps := range st.procs {
			for i, p := range ps {
				if sig, _ := p.first(); sig != syscall.SIGTERM {
					t.Errorf("N=%d: replica %d got %v, want SIGTERM: every count's replicas are stopped after it", n, i+1, sig)
				}
			}
		}
		if len(c.replicas) != 0 {
			t.Errorf("got %d replicas left running, want none", len(c.replicas))
		}
		for _, ids := range st.ids {
			if !slices.Equal(ids, []int64{1, 2, 3, 4}) {
				t.Errorf("got installations %v measured, want 1 to 4", ids)
			}
		}
		if want := []TenantsRow{st.rows[1], st.rows[3]}; !slices.Equal(res.Rows, want) {
			t.Errorf("got rows\n%+v, want steady's, in the counts' order\n%+v", res.Rows, want)
		}
		if res.Installations != 4 || res.RunsPer != 2 || res.Interval != iv || res.Shards != 8 || res.TTL != 3*iv || res.Retry != iv {
			t.Errorf("got %d installations × %d runs, interval %v, %d shards, TTL %v, retry %v; want the scenario's 4 × 2, %v, 8, and the sweeper's 3 intervals and 1",
				res.Installations, res.RunsPer, res.Interval, res.Shards, res.TTL, res.Retry, iv)
		}
		if res.Ratio != 1.15 || res.RatioMax != 1.2 {
			t.Errorf("got ratio %.3f (max %.2f), want 1.150 (max 1.20): N=3's 23 requests over N=1's 20", res.Ratio, res.RatioMax)
		}
		if res.Overlaps != 3 || res.LongestOverlap != ms(300) {
			t.Errorf("got %d overlaps, longest %v; want 3, 300ms: each count's, from the interval its replicas answered in to the end of its disturbances", res.Overlaps, res.LongestOverlap)
		}
		if res.SeedLimited != 2 || res.Limited != 3 {
			t.Errorf("got %d refusals while seeding and %d of the replicas, want 2 and 3: from the interval seeding began in, told apart by sender", res.SeedLimited, res.Limited)
		}
		if res.SeedAppLimited != 4 || res.AppLimited != 3 {
			t.Errorf("got %d App-JWT refusals while seeding and %d after, want 4 and 3: split at the replicas' start", res.SeedAppLimited, res.AppLimited)
		}
		if res.Behind != 2 || !res.Done {
			t.Errorf("got behind %v, done %v; want disturb's 2, done", res.Behind, res.Done)
		}
	})
}

// TestTenantsRunOfOneCountDisturbsItWithoutARatio pins a tenants run at
// one replica count, in virtual time on scripted steps: that count is
// the largest, so it is disturbed after its row, and there is no ratio
// (0, not the count's cost over its own).
func TestTenantsRunOfOneCountDisturbsItWithoutARatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 2 * time.Second
		st := &scriptedTenants{t: t, procs: map[int][]*signalled{}, seedEnd: time.Now().Add(time.Second),
			rows: map[int]TenantsRow{3: {Replicas: 3, Requests: 23, Sweepers: 3}}, per: map[int]map[int64]int64{3: {1: 11, 2: 12}}}
		c := &cluster{interval: iv, dir: t.TempDir(), sim: st.sim(nil, iv)}
		s := tenantsScenario{installations: 2, runsPer: 1, replicas: []int{3}, logf: t.Logf, steps: st}
		res, err := s.run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if want := []string{"seed", "up 3 with 0 running", "steady 3", "disturb with 3 running"}; !slices.Equal(st.calls, want) {
			t.Errorf("got steps %q, want %q: the one count disturbed after its row", st.calls, want)
		}
		if res.Ratio != 0 || res.RatioP95 != 0 || res.RatioMax != 0 || len(res.Rows) != 1 || !res.Done {
			t.Errorf("got ratio %v (p95 %v, max %v), %d rows, done %v; want no ratio, 1 row, done", res.Ratio, res.RatioP95, res.RatioMax, len(res.Rows), res.Done)
		}
	})
}

// TestTenantsUpPointsTheWebhooksAtTheFront pins how the tenants scenario
// starts a replica count, in virtual time on scripted replicas (answering
// last to first) and simulator: it returns the instant the last replica
// answered, before the simulator's webhooks are pointed (which takes a
// while), and they are pointed at the replica disturb sends its own to,
// the first of the cluster's.
func TestTenantsUpPointsTheWebhooksAtTheFront(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			mu        sync.Mutex
			pointedAt string
		)
		mux := http.NewServeMux()
		mux.HandleFunc("POST /_sim/webhook", func(w http.ResponseWriter, r *http.Request) {
			var b struct{ URL string }
			json.NewDecoder(r.Body).Decode(&b)
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			pointedAt = b.URL
			mu.Unlock()
		})
		c := &cluster{interval: 2 * time.Second, sim: scriptedSim(mux)}
		c.startOnce = func(ctx context.Context, seq int, spec replicaSpec) (*replica, error) {
			time.Sleep(time.Duration(4-seq) * 100 * time.Millisecond)
			name := fmt.Sprintf("replica-%02d", seq)
			r, _ := scriptedReplica(t, name, name, http.NotFoundHandler())
			return r, nil
		}
		tUp, err := tenantsScenario{}.up(t.Context(), c, 3, replicaSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tUp.Sub(start), 300*time.Millisecond; got != want {
			t.Errorf("got the replicas up %v after their start, want %v: when the last answered, before the webhooks were pointed", got, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(c.replicas) != 3 || pointedAt != webhookURL(c.replicas[0].api) {
			t.Errorf("got %d replicas, the webhooks pointed at %q; want 3, the front's %q", len(c.replicas), pointedAt, webhookURL(c.replicas[0].api))
		}
	})
}
