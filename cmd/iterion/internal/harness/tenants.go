package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// The tenants scenario: one GitHub App installed many times, every
// installation with open runs, served by 1 and then N replicas in App mode
// (serve with --github-app-id and no --github-installation-id), with
// GitHub's latency model and secondary limits on. At the largest N,
// installations are added and removed through the simulator (which sends
// the webhooks), a webhook names an installation the replicas were never
// told of, and one replica is killed with SIGKILL. Every figure comes from
// the simulator's own request log, by installation and sender.

// TenantsRow is one replica count's steady state: a window of whole
// intervals once every installation has settled on one replica.
type TenantsRow struct {
	Replicas int
	// Settled says whether every installation was swept by one replica,
	// the same over two stretches of settleHalf intervals running, and N
	// replicas swept, before the deadline; SettleAfter is how long that
	// took from their start.
	Settled     bool
	SettleAfter time.Duration
	// Window is the steady state measured: whole intervals of the
	// request log.
	Window time.Duration
	// Installations swept in the window, and their sweeper requests.
	Installations int
	Requests      int64
	// Sweepers are the replicas that held at least one installation in
	// the window, a replica holding an installation when it sent most of
	// its sweep; Balance is the most installations one replica held over
	// the mean over Replicas.
	Sweepers int
	Balance  float64
	// LongestGap is the longest an installation went unswept in the
	// window, and GapInstallation which.
	LongestGap      time.Duration
	GapInstallation int64
	// Overlaps are pairs of replicas that swept one installation at once
	// in the window.
	Overlaps int
	// Limited is the requests a rate limit refused in the window, any
	// installation, replica or lane.
	Limited int64
}

// PerHour is the mean installation's sweeper requests per compressed hour
// (60 intervals).
func (r TenantsRow) PerHour(interval time.Duration) float64 {
	if r.Installations == 0 || r.Window == 0 {
		return 0
	}
	return float64(r.Requests) / float64(r.Installations) * float64(60*interval) / float64(r.Window)
}

// TenantsResult is the tenants scenario's figures.
type TenantsResult struct {
	Installations, RunsPer int
	Interval, TTL, Retry   time.Duration
	Shards                 int // 0: serve's default
	Rows                   []TenantsRow
	// Ratio is the sweep's requests per installation at the largest N
	// over those at N=1, the same window, over the installations both
	// swept; RatioP95 and RatioMax the spread of the installations' own.
	Ratio, RatioP95, RatioMax float64
	// Overlaps are pairs of replicas that swept one installation at once,
	// over every replica count's whole run (settling, churn and kill
	// included); LongestOverlap the longest.
	Overlaps       int
	LongestOverlap time.Duration
	// Added installations, each added by webhook and given its runs;
	// AddedSwept of them were swept afterwards, the slowest AddedAfter
	// its webhook was answered.
	Added, AddedSwept int
	AddedAfter        time.Duration
	// Removed installations; RemovedAfter is the longest from a removal
	// to the removed installation's last request (0 when none came after).
	Removed      int
	RemovedAfter time.Duration
	// KilledInstallations are those the replica killed with SIGKILL swept
	// in the two intervals before; KillSwept of them swept again by
	// another, the slowest KillAfter the kill.
	KilledInstallations, KillSwept int
	KillAfter                      time.Duration
	// UnknownStatus is the answer to a signed webhook naming an
	// installation no replica was told of; UnknownLookups the App-JWT
	// requests the replicas sent in the two intervals after it;
	// UnknownAlive says the replica still answered.
	UnknownStatus  int
	UnknownLookups int64
	UnknownAlive   bool
	// Behind is merge_gate_sweep_behind summed over the live replicas at
	// the end of the largest N's run.
	Behind float64
	// Limited is the requests made with an installation's token that a
	// rate limit refused from the first replica's start to the end, any
	// installation, replica or lane (the request log); SeedLimited those
	// of the seeding replica, told apart by sender, as the replicas start
	// in the interval the seeding ended in. AppLimited and SeedAppLimited
	// are the same of the App's JWT (minting installation tokens, listing
	// installations, finding a repository's), answered 403 or 429 (GET
	// /_sim/stats), split at the replicas' start.
	Limited, SeedLimited, AppLimited, SeedAppLimited int64
	// Done says the run ended without an error, every figure above
	// measured. A run that failed part-way (bench reports it) leaves
	// figures later steps count at zero, so Goals meets none without it.
	Done bool
}

// Bounds of the goals.
func (r TenantsResult) killBound() time.Duration { return r.TTL + r.Retry + r.Interval }
func (r TenantsResult) gapBound() time.Duration  { return r.Interval * 3 / 2 }

// TenantsGoal is one goal of the tenants scenario: what it asks, what was
// measured, and whether that meets it.
type TenantsGoal struct {
	Goal, Measured string
	Met            bool
}

// Goals reports each goal and whether it was met, in a fixed order; none
// is met unless the run was Done.
func (r TenantsResult) Goals() []TenantsGoal {
	var out []TenantsGoal
	add := func(goal, measured string, met bool) { out = append(out, TenantsGoal{goal, measured, r.Done && met}) }
	add("one replica at a time per installation (decision 4: only a stalled holder overlaps)",
		fmt.Sprintf("%d overlaps, longest %v", r.Overlaps, r.LongestOverlap.Round(time.Millisecond)), r.Overlaps == 0)
	if n := len(r.Rows); n > 1 {
		add(fmt.Sprintf("requests per installation, N=%d ÷ N=%d ≤ 1.05", r.Rows[n-1].Replicas, r.Rows[0].Replicas),
			fmt.Sprintf("%.3f (installations' own: p95 %.2f, max %.2f)", r.Ratio, r.RatioP95, r.RatioMax), r.Ratio > 0 && r.Ratio <= 1.05)
	}
	if n := len(r.Rows); n > 0 {
		hi := r.Rows[n-1]
		add(fmt.Sprintf("at N=%d every replica sweeps, the busiest ≤ 1.3 × the mean", hi.Replicas),
			fmt.Sprintf("%d of %d sweep, busiest %.2f × the mean", hi.Sweepers, hi.Replicas, hi.Balance), hi.Sweepers == hi.Replicas && hi.Balance <= 1.3)
	}
	var gap time.Duration
	for _, row := range r.Rows {
		gap = max(gap, row.LongestGap)
	}
	add("every installation swept every interval (longest gap ≤ 1.5 intervals), not behind at the end",
		fmt.Sprintf("longest gap %v ≤ %v; behind at the end: %.0f", gap.Round(time.Millisecond), r.gapBound(), r.Behind), gap <= r.gapBound() && r.Behind == 0)
	add("kill -9: its installations swept again within TTL + retry + one tick",
		fmt.Sprintf("%d of %d, slowest %v ≤ %v", r.KillSwept, r.KilledInstallations, r.KillAfter.Round(time.Millisecond), r.killBound()),
		r.KilledInstallations > 0 && r.KillSwept == r.KilledInstallations && r.KillAfter <= r.killBound())
	add("an installation added by webhook swept within 2 intervals",
		fmt.Sprintf("%d of %d, slowest %v ≤ %v", r.AddedSwept, r.Added, r.AddedAfter.Round(time.Millisecond), 2*r.Interval),
		r.Added > 0 && r.AddedSwept == r.Added && r.AddedAfter <= 2*r.Interval)
	add("a removed installation costs nothing after 1 interval",
		fmt.Sprintf("%d removed, latest request %v after its removal ≤ %v", r.Removed, r.RemovedAfter.Round(time.Millisecond), r.Interval),
		r.Removed > 0 && r.RemovedAfter <= r.Interval)
	add("0 rate-limit refusals of any kind (primary or secondary), any installation",
		fmt.Sprintf("installation tokens %d, the App's JWT %d, from the replicas' start (while seeding: %d and %d)",
			r.Limited, r.AppLimited, r.SeedLimited, r.SeedAppLimited), r.Limited == 0 && r.AppLimited == 0)
	add("a webhook for an unknown installation: 202, looked up, not crashed on",
		fmt.Sprintf("answered %d, %d App-JWT requests after it, replica alive: %t", r.UnknownStatus, r.UnknownLookups, r.UnknownAlive),
		r.UnknownStatus == 202 && r.UnknownLookups > 0 && r.UnknownAlive)
	return out
}

// tenantsScenario drives the tenants scenario on a cluster of its own.
type tenantsScenario struct {
	installations, runsPer int
	replicas               []int // increasing; the largest gets churn, the unknown webhook and the kill
	window                 int   // intervals measured in steady state
	churn                  int   // installations added, and as many removed, at the largest N
	shards                 int   // serve --sweep-shards; 0: its default
	logf                   func(format string, args ...any)
	// steps are the steps run takes on the cluster: s's own when nil, a
	// unit test's scripted stand-ins otherwise.
	steps tenantsSteps
}

// tenantsSteps are the steps of the tenants scenario's run on its cluster:
// seeding the runs, starting a replica count, measuring its steady state,
// and disturbing the largest; tenantsScenario's own methods.
type tenantsSteps interface {
	seed(ctx context.Context, c *cluster, spec replicaSpec) (string, error)
	up(ctx context.Context, c *cluster, n int, spec replicaSpec) (time.Time, error)
	steady(ctx context.Context, c *cluster, n int, ids []int64, tUp time.Time) (TenantsRow, map[int64]int64, error)
	disturb(ctx context.Context, c *cluster, res *TenantsResult, ids []int64) error
}

// ratio is costRatio of the sweep's requests per installation at the
// largest replica count (the last of s.replicas, which increase) over
// those at the smallest, from byN, each count's window by installation.
func (s tenantsScenario) ratio(byN map[int]map[int64]int64) (mean, p95, most float64) {
	return costRatio(byN[s.replicas[0]], byN[s.replicas[len(s.replicas)-1]])
}

// startCluster starts the scenario's cluster in dir: forge-sim with the
// App installed installations times, one repository each, the latency
// model on and GitHub's budgets and secondary limits, its minute the
// sweep interval.
func (s tenantsScenario) startCluster(ctx context.Context, bins binaries, dir string, interval time.Duration) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProcess, err)
	}
	return startCluster(ctx, bins, dir, interval, forgesim.DefaultBudget,
		"--installations", fmt.Sprint(s.installations), "--repos-per-installation", "1", "--latency",
		"--app-id", fmt.Sprint(tenantsAppID), "--webhook-secret", tenantsSecret)
}

// run seeds the runs, measures each replica count and, at the largest,
// the churn, the unknown webhook and the kill; on an error, the figures
// set before it.
func (s tenantsScenario) run(ctx context.Context, c *cluster) (TenantsResult, error) {
	iv := c.interval
	res := TenantsResult{Installations: s.installations, RunsPer: s.runsPer, Interval: iv, Shards: s.shards,
		TTL: c.ttl(), Retry: c.retry()}
	key, err := writeAppKey(c.dir)
	if err != nil {
		return res, err
	}
	spec := s.replicaSpec(key)
	var st tenantsSteps = s
	if s.steps != nil {
		st = s.steps
	}
	tSeed := time.Now()
	seeder, err := st.seed(ctx, c, spec)
	if err != nil {
		return res, err
	}
	appStart, err := appRefusals(ctx, c.sim)
	if err != nil {
		return res, err
	}
	res.SeedAppLimited = appStart
	ids := make([]int64, s.installations)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	byN := map[int]map[int64]int64{}
	for _, n := range s.replicas {
		tUp, err := st.up(ctx, c, n, spec)
		if err != nil {
			return res, err
		}
		row, perInst, err := st.steady(ctx, c, n, ids, tUp)
		res.Rows = append(res.Rows, row)
		if err != nil {
			return res, err
		}
		byN[n] = perInst
		s.logf("tenants N=%d: settled %t in %v; %d installations, %.1f sweep requests/hour each, %d sweepers, busiest %.2f × mean, longest gap %v, %d overlaps, %d limited",
			n, row.Settled, row.SettleAfter.Round(time.Millisecond), row.Installations, row.PerHour(iv), row.Sweepers, row.Balance,
			row.LongestGap.Round(time.Millisecond), row.Overlaps, row.Limited)
		if n == s.replicas[len(s.replicas)-1] {
			if err := st.disturb(ctx, c, &res, ids); err != nil {
				return res, err
			}
		}
		log, err := readRequestLog(ctx, c.sim, tUp.Add(-iv))
		if err != nil {
			return res, err
		}
		for _, o := range overlapsOf(sweepsOf(log).between(tUp.Add(-iv), time.Now()), res.TTL) {
			res.Overlaps++
			res.LongestOverlap = max(res.LongestOverlap, o.length)
		}
		c.stopAll()
	}
	if len(s.replicas) > 1 {
		res.Ratio, res.RatioP95, res.RatioMax = s.ratio(byN)
	}
	log, err := readRequestLog(ctx, c.sim, tSeed.Add(-iv))
	if err != nil {
		return res, err
	}
	res.SeedLimited, res.Limited = seedAndReplicaRefusals(log, seeder, tSeed.Add(-iv), time.Now().Add(iv))
	appEnd, err := appRefusals(ctx, c.sim)
	if err != nil {
		return res, err
	}
	res.AppLimited = appEnd - appStart
	res.Done = true
	for _, g := range res.Goals() {
		met := "met"
		if !g.Met {
			met = "NOT met"
		}
		s.logf("tenants: %s: %s (%s)", g.Goal, g.Measured, met)
	}
	return res, nil
}

// replicaSpec is how the scenario starts its replicas: in App mode with
// the App's key at key, checking the simulator's webhook signatures, with
// the sweep's time budget on, and on the scenario's shards.
func (s tenantsScenario) replicaSpec(key string) replicaSpec {
	spec := replicaSpec{
		app: []string{"--github-app-id", fmt.Sprint(tenantsAppID), "--github-private-key-file", key},
		// The latency model spends GitHub's time, compressed as the
		// minute is: the sweep's time budget applies again.
		extra: []string{"--webhook-secret", tenantsSecret, "--sweep-no-time-budget=false"},
	}
	if s.shards > 0 {
		spec.extra = append(spec.extra, "--sweep-shards", fmt.Sprint(s.shards))
	}
	return spec
}

// up starts n replicas of spec and points the simulator's webhooks at the
// first of them, where disturb sends its own; it returns when every
// replica answered, before the webhooks were pointed.
func (s tenantsScenario) up(ctx context.Context, c *cluster, n int, spec replicaSpec) (time.Time, error) {
	rs, err := c.startReplicas(ctx, n, spec)
	if err != nil {
		return time.Time{}, err
	}
	tUp := time.Now()
	return tUp, pointWebhooks(ctx, c.sim, webhookURL(rs[0].api))
}

// seed seeds every installation's runs (storeSeeder: the first through one
// seeding replica's POST /api/runs, the rest written to the store as that
// one was) and returns the seeding replica's lease owner, which names it in
// the simulator's request log; the seeding replica never sweeps (its first
// pass would come an hour after its terms begin).
func (s tenantsScenario) seed(ctx context.Context, c *cluster, spec replicaSpec) (string, error) {
	seedSpec := spec
	seedSpec.extra = append(slices.Clone(spec.extra), "--sweep-interval", time.Hour.String())
	rs, err := c.startReplicas(ctx, 1, seedSpec)
	if err != nil {
		return "", err
	}
	defer c.stopAll()
	t0 := time.Now()
	// Round-robin over the installations: the runs seeded at once are of
	// different installations, whose first run resolves it.
	var runs []runRequest
	of := map[string]int64{}
	for j := range s.runsPer {
		for id := int64(1); id <= int64(s.installations); id++ {
			runs = append(runs, tenantRuns(id, s.runsPer)[j])
			of[tenantRepo(id)] = id
		}
	}
	installationOf := func(r runRequest) int64 { return of[r.Repo] }
	ss, err := newStoreSeeder(ctx, c, rs[0].api, runs[0], installationOf)
	if err != nil {
		return "", err
	}
	defer ss.close(ctx)
	if err := ss.write(ctx, runs[1:], installationOf, tenantsSeedConcurrency); err != nil {
		return "", err
	}
	s.logf("tenants: seeded %d installations × %d runs in %v (the first through POST /api/runs, the rest written to the store as it stored that one)",
		s.installations, s.runsPer, time.Since(t0).Round(time.Millisecond))
	return rs[0].owner, nil
}

// tenantsSeedConcurrency is how many runs are seeded at once.
const tenantsSeedConcurrency = 16

// tenantsMintsPerInterval is a low estimate of the installation tokens a
// replica starting afresh mints on the App's JWT per interval (the
// simulator's minute): its CPU-time limit, 90 s of modelled response time
// a minute at a median of 1 s a request with a log-normal tail
// (forgesim's latency.go), admits some 45 to 90. A replica count's
// settling waits an interval more for each that many installations, on
// top of the 15 every size gets.
const tenantsMintsPerInterval = 30

// steady waits for n replicas started at tUp to settle, then measures a
// window of whole intervals; it returns the row and the sweep's requests
// by installation in the window.
func (s tenantsScenario) steady(ctx context.Context, c *cluster, n int, ids []int64, tUp time.Time) (TenantsRow, map[int64]int64, error) {
	iv := c.interval
	row := TenantsRow{Replicas: n}
	deadline := tUp.Add(c.ttl() + time.Duration(15+s.installations/tenantsMintsPerInterval)*iv + 10*time.Second)
	why := "not looked"
	for !row.Settled && time.Now().Before(deadline) {
		clock.Sleep(ctx, iv)
		look := alignUp(time.Now(), iv).Add(-(2*settleHalf + 1) * iv)
		log, err := readRequestLog(ctx, c.sim, look)
		if err != nil {
			return row, nil, err
		}
		if row.Settled, why = settled(sweepsOf(log), ids, n, look, iv); row.Settled {
			row.SettleAfter = time.Since(tUp)
		}
	}
	if !row.Settled {
		s.logf("tenants N=%d: not settled within %v (%s); measuring anyway", n, time.Since(tUp).Round(time.Millisecond), why)
	}
	from := alignUp(time.Now(), iv)
	to := from.Add(time.Duration(s.window) * iv)
	clock.Sleep(ctx, time.Until(to)+iv/4) // the last bucket complete
	log, err := readRequestLog(ctx, c.sim, from)
	if err != nil {
		return row, nil, err
	}
	sl := sweepsOf(log).between(from, to)
	row.Window = to.Sub(from)
	per := sl.requestsByInstallation()
	row.Installations = len(per)
	row.Requests = total64(per)
	held := sl.holders()
	row.Sweepers = len(held)
	row.Balance = balance(held, n)
	row.LongestGap, row.GapInstallation = sl.longestGap(ids, from, to)
	row.Overlaps = len(overlapsOf(sl, c.ttl()))
	row.Limited = limitedIn(log, from, to, nil)
	return row, per, nil
}

// disturb adds and removes installations, sends a webhook for one the
// replicas were never told of, and kills one replica with SIGKILL, each
// measured from the simulator's request log.
func (s tenantsScenario) disturb(ctx context.Context, c *cluster, res *TenantsResult, ids []int64) error {
	iv := c.interval
	tChurn := time.Now()
	front := c.replicas[0] // where the simulator sends its webhooks, and the API calls go
	// Churn: add churn installations, each with its runs, and remove as
	// many. An added installation's first run goes through POST /api/runs
	// (its repository looked up on the App's JWT), the rest straight to
	// the store, as seeding wrote them; one seeder serves them all, its
	// sample the first added installation's first run.
	added := map[int64]time.Time{}
	next := int64(s.installations) + 1
	var ss *storeSeeder
	defer func() {
		if ss != nil {
			ss.close(ctx)
		}
	}()
	for range s.churn {
		id := next
		next++
		if err := addInstallation(ctx, c.sim, id); err != nil {
			return err
		}
		added[id] = time.Now()
		runs := tenantRuns(id, s.runsPer)
		of := func(runRequest) int64 { return id }
		var err error
		if ss == nil {
			ss, err = newStoreSeeder(ctx, c, front.api, runs[0], of)
		} else {
			err = seedRuns(ctx, c.sim, front.api, runs[:1], 1, iv)
		}
		if err == nil {
			err = ss.write(ctx, runs[1:], of, tenantsSeedConcurrency)
		}
		if err != nil {
			return err
		}
	}
	removed := map[int64]time.Time{}
	for i := range s.churn {
		id := ids[(i*len(ids))/max(s.churn, 1)]
		if err := removeInstallation(ctx, c.sim, id); err != nil {
			return err
		}
		removed[id] = time.Now()
	}

	// A webhook for an installation no replica was told of: the simulator
	// installs it with its webhooks off. Its two intervals are also the
	// added installations' bound to be swept in.
	unknown := next
	if err := pointWebhooks(ctx, c.sim, ""); err != nil {
		return err
	}
	if err := addInstallation(ctx, c.sim, unknown); err != nil {
		return err
	}
	r := tenantRuns(unknown, 1)[0]
	if err := c.sim.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA); err != nil {
		return err
	}
	if err := pointWebhooks(ctx, c.sim, webhookURL(front.api)); err != nil {
		return err
	}
	before, err := appRequests(ctx, c.sim)
	if err != nil {
		return err
	}
	if res.UnknownStatus, err = sendPullWebhook(ctx, front.api, unknown, r.HeadSHA); err != nil {
		return err
	}
	clock.Sleep(ctx, 2*iv)
	after, err := appRequests(ctx, c.sim)
	if err != nil {
		return err
	}
	res.UnknownLookups = after - before
	_, herr := front.api.owner(ctx)
	res.UnknownAlive = herr == nil && !front.p.exited()

	// The kill waits until the added installations' bound, with one
	// interval to spare, has passed since the last was added: an added
	// installation on the victim's shards would otherwise wait for the
	// takeover, and the kill's cost would be counted as the add's.
	var lastAdd time.Time
	for _, t := range added {
		if t.After(lastAdd) {
			lastAdd = t
		}
	}
	if d := time.Until(lastAdd.Add(3 * iv)); d > 0 {
		clock.Sleep(ctx, d)
	}

	// Kill -9 of one replica, not the one the webhooks go to.
	victim := c.replicas[len(c.replicas)-1]
	if victim == front {
		return fmt.Errorf("%w: the kill needs 2 replicas or more", ErrMeasure)
	}
	tKill := time.Now()
	c.stopReplica(victim, syscall.SIGKILL)
	clock.Sleep(ctx, res.killBound()+2*iv)
	if res.Behind, err = sweepBehind(ctx, c.replicas); err != nil {
		return err
	}

	log, err := readRequestLog(ctx, c.sim, tChurn.Add(-iv))
	if err != nil {
		return err
	}
	sl := sweepsOf(log)
	res.Added = len(added)
	for id, t := range added {
		if at := sl.firstSweepAfter(id, t, ""); !at.IsZero() {
			res.AddedSwept++
			res.AddedAfter = max(res.AddedAfter, at.Sub(t))
		}
	}
	res.Removed = len(removed)
	for id, t := range removed {
		res.RemovedAfter = max(res.RemovedAfter, lastRequest(log, id).Sub(t))
	}
	// The victim's installations, but those removed just before: nobody
	// should sweep them again.
	killed := slices.DeleteFunc(sl.sweptBy(victim.owner, tKill.Add(-2*iv), tKill), func(id int64) bool {
		_, gone := removed[id]
		return gone
	})
	res.KilledInstallations = len(killed)
	for _, id := range killed {
		if at := sl.firstSweepAfter(id, tKill, victim.owner); !at.IsZero() {
			res.KillSwept++
			res.KillAfter = max(res.KillAfter, at.Sub(tKill))
		}
	}
	s.logf("tenants churn: %d added, swept %d, slowest %v; %d removed, latest request %v after; unknown installation's webhook %d, %d lookups; kill: %d installations, %d swept again, slowest %v",
		res.Added, res.AddedSwept, res.AddedAfter.Round(time.Millisecond), res.Removed, res.RemovedAfter.Round(time.Millisecond),
		res.UnknownStatus, res.UnknownLookups, res.KilledInstallations, res.KillSwept, res.KillAfter.Round(time.Millisecond))
	return nil
}
