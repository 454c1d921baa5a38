package harness

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
)

// simBudget is the simulator's per-token hourly budget outside the budget
// scenario: far above anything a run spends, so nothing is rate limited.
const simBudget = 10_000_000

// gateContext is the status context the seeded runs gate on (the default).
const gateContext = "iterion/review"

// seedRepo is the repository every seeded pull request lives in.
const seedRepo = "acme/app"

// boardRepo is the cost scenario's board repository, and boardIssues how
// many issues are seeded in it. The board lists the issues updated since
// its watermark and stores each one's card every pass, a Mongo write: a
// repository of its own with few issues keeps that load from slowing the
// sweeper it is measured beside.
const (
	boardRepo   = "acme/board"
	boardIssues = 3
)

// headSHA is the head of seeded pull request n: 40 hex digits, unique per n.
func headSHA(n int) string {
	return fmt.Sprintf("%040x", uint64(n)*0x9e3779b97f4a7c15)
}

// seed opens Runs pull requests on the simulator and records a success
// verdict for each through POST /api/runs on a seeding replica, which offers
// it at once: every forge status then agrees with its verdict. It also opens
// boardIssues issues in boardRepo, for the cost scenario's board sync.
func (h *run) seed(ctx context.Context) error {
	for n := 1; n <= boardIssues; n++ {
		if err := h.c.sim.seedIssue(ctx, boardRepo, n, fmt.Sprintf("harness issue %d", n)); err != nil {
			return err
		}
	}
	rs, err := h.c.startReplicas(ctx, 1, replicaSpec{})
	if err != nil {
		return err
	}
	seeder := rs[0]
	for n := 1; n <= h.o.Runs; n++ {
		r := runRequest{Repo: seedRepo, Pull: n, HeadSHA: headSHA(n), Verdict: "success"}
		if err := h.c.sim.seedPull(ctx, r.Repo, r.Pull, r.HeadSHA); err != nil {
			return err
		}
		if err := seeder.api.postRun(ctx, r); err != nil {
			return err
		}
		h.population = append(h.population, r)
	}
	h.logf("seeded %d gating runs through %s and %d board issues", h.o.Runs, seeder.name, boardIssues)
	h.c.stopAll()
	return nil
}

// CostRow is one configuration of the cost scenario.
type CostRow struct {
	Replicas int
	Lease    bool
	// PerMinute is sweeper-lane requests per real minute, summed over the
	// replicas: the least-squares slope of the simulator's counts.
	PerMinute float64
	// PerInterval is the same per sweep interval: the compressed minute,
	// comparable to the ADR's requests per minute.
	PerInterval float64
	// Share304 is the share of the window's sweep reads (GETs) the
	// simulator answered 304 Not Modified: with ETags and nothing changing,
	// nearly all of them, and GitHub charges none to the budget. NaN when
	// the sweep sent no GET: the batched sweep reads through GraphQL.
	Share304 float64
	// GraphQLPerInterval is the GraphQL points the sweeper was charged per
	// interval over the window, summed over the replicas: the budget the
	// batched sweep spends (one query a pass), which the budget scenario
	// is sized from.
	GraphQLPerInterval float64
	// Sweepers is how many replicas sent sweeper requests in the window.
	Sweepers int
	// Sim and Transport are the configuration's requests over its whole
	// life as the simulator counted them and as the replicas' transports
	// counted them on lane merge-gate-sweeper, read at one quiet instant.
	Sim, Transport int64
	// The board sync's figures, measured alongside on the same replicas,
	// each running it on seedRepo every interval: BoardPerMinute and
	// BoardPerInterval are its requests (the simulator's issue-list route,
	// lane forge-board-sync) as PerMinute and PerInterval are the
	// sweeper's, BoardSyncers how many replicas sent them in the window,
	// and BoardSim and BoardTransport its counts as Sim and Transport.
	BoardPerMinute, BoardPerInterval float64
	BoardSyncers                     int
	BoardSim, BoardTransport         int64
}

// Agree reports whether the transport's sweeper counts equal the
// simulator's.
func (r CostRow) Agree() bool { return r.Sim == r.Transport }

// BoardAgree reports whether the transport's board sync counts equal the
// simulator's.
func (r CostRow) BoardAgree() bool { return r.BoardSim == r.BoardTransport }

// cost measures the sweep's request rate for every N, without and then with
// the lease, each configuration on fresh replicas.
func (h *run) cost(ctx context.Context) error {
	for _, lease := range []bool{false, true} {
		for _, n := range h.o.Ns {
			row, err := h.costOne(ctx, n, lease)
			if err != nil {
				return err
			}
			h.rep.Cost = append(h.rep.Cost, row)
			h.logf("N=%-2d lease=%-5v %8.0f req/min  %6.1f req/interval  sweepers %d  sim %d transport %d; board %5.0f req/min  %4.1f req/interval  syncers %d  sim %d transport %d",
				n, lease, row.PerMinute, row.PerInterval, row.Sweepers, row.Sim, row.Transport,
				row.BoardPerMinute, row.BoardPerInterval, row.BoardSyncers, row.BoardSim, row.BoardTransport)
		}
	}
	return nil
}

func (h *run) costOne(ctx context.Context, n int, lease bool) (CostRow, error) {
	board := []string{"--board-repos", boardRepo, "--board-interval", h.o.Interval.String()}
	rs, err := h.c.startReplicas(ctx, n, replicaSpec{noLease: !lease, extra: board})
	if err != nil {
		return CostRow{}, err
	}
	defer h.c.stopAll()
	tokens := tokensOf(rs)
	// Warm up: wait until the replicas that should sweep and sync the board
	// do, then one more interval so the first (deep, full) passes are behind.
	want := n
	if lease {
		want = 1
	}
	active := func(c map[string]int64) int {
		k := 0
		for _, t := range tokens {
			if c[t] > 0 {
				k++
			}
		}
		return k
	}
	if _, err := pollUntil(ctx, h.c.sim, 20*time.Millisecond, 10*h.o.Interval+10*time.Second, func(st simStats) bool {
		return active(st.byToken(isSweep)) >= want && active(st.byToken(isBoard)) >= want
	}); err != nil {
		return CostRow{}, fmt.Errorf("N=%d lease=%v: %d replicas never swept and synced the board: %w", n, lease, want, err)
	}
	clock.Sleep(ctx, h.o.Interval)
	st0, err := h.c.sim.stats(ctx)
	if err != nil {
		return CostRow{}, err
	}
	t0 := time.Now()
	sp := startSampler(ctx, h.c.sim, 20*time.Millisecond)
	clock.Sleep(ctx, h.o.Window)
	ss, err := sp.stop()
	if err != nil {
		return CostRow{}, err
	}
	st1, err := h.c.sim.stats(ctx)
	if err != nil {
		return CostRow{}, err
	}
	intervals := float64(time.Since(t0)) / float64(h.o.Interval)
	points := total(pick(st1.pointsByToken(isGraphQL), tokens)) - total(pick(st0.pointsByToken(isGraphQL), tokens))
	rate := slopePerSecond(ss, tokens)
	bs := boardSamples(ss)
	boardRate := slopePerSecond(bs, tokens)
	row := CostRow{
		Replicas:           n,
		Lease:              lease,
		PerMinute:          rate * 60,
		PerInterval:        rate * h.o.Interval.Seconds(),
		Sweepers:           len(activeIn(ss, ss[0].at, ss[len(ss)-1].at, tokens)),
		Share304:           share304(st0, st1, tokens),
		GraphQLPerInterval: float64(points) / intervals,
		BoardPerMinute:     boardRate * 60,
		BoardPerInterval:   boardRate * h.o.Interval.Seconds(),
		BoardSyncers:       len(activeIn(bs, bs[0].at, bs[len(bs)-1].at, tokens)),
	}
	sweep, boardSync, err := h.agreement(ctx, rs)
	row.Sim, row.Transport = sweep.sim, sweep.transport
	row.BoardSim, row.BoardTransport = boardSync.sim, boardSync.transport
	return row, err
}

// tally is one lane's requests as the simulator and the transports counted
// them.
type tally struct{ sim, transport int64 }

// agreement sums, over the replicas, the sweeper-lane and board-sync-lane
// counts of each one's transport and the simulator's counts for its token
// on the matching routes, each read at an instant when that replica had no
// request in flight: between two identical reads of its /metrics. Counts
// that disagree are read again a few times (a response may be on its way);
// the last quiet reading stands.
func (h *run) agreement(ctx context.Context, rs []*replica) (sweep, board tally, err error) {
	for _, r := range rs {
		s, b, err := h.agreementOf(ctx, r)
		if err != nil {
			return tally{}, tally{}, err
		}
		sweep.sim, sweep.transport = sweep.sim+s.sim, sweep.transport+s.transport
		board.sim, board.transport = board.sim+b.sim, board.transport+b.transport
	}
	return sweep, board, nil
}

func (h *run) agreementOf(ctx context.Context, r *replica) (sweep, board tally, err error) {
	quiet := false
	for range 100 {
		before, err := r.api.transportCounts(ctx)
		if err != nil {
			return tally{}, tally{}, err
		}
		st, err := h.c.sim.stats(ctx)
		if err != nil {
			return tally{}, tally{}, err
		}
		after, err := r.api.transportCounts(ctx)
		if err != nil {
			return tally{}, tally{}, err
		}
		if before[forge.LaneMergeGateSweeper] == after[forge.LaneMergeGateSweeper] && before[forge.LaneBoardSync] == after[forge.LaneBoardSync] {
			quiet = true
			sweep = tally{sim: st.byToken(isSweep)[r.token], transport: after[forge.LaneMergeGateSweeper]}
			board = tally{sim: st.byToken(isBoard)[r.token], transport: after[forge.LaneBoardSync]}
			if sweep.sim == sweep.transport && board.sim == board.transport {
				return sweep, board, nil
			}
		}
		clock.Sleep(ctx, h.o.Interval/7)
	}
	if !quiet {
		return tally{}, tally{}, fmt.Errorf("%w: %s never had a quiet instant to compare its transport's counts with the simulator's", ErrMeasure, r.name)
	}
	return sweep, board, nil
}

func tokensOf(rs []*replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.token
	}
	return out
}

// share304 is the share of the tokens' sweep GETs (the board's excluded)
// between a and b that were answered 304; NaN when there were none, as
// when the batched sweep reads through GraphQL alone.
func share304(a, b simStats, tokens []string) float64 {
	isGet := func(r simRequests) bool {
		return r.Method == http.MethodGet && isSweep(r) && slices.Contains(tokens, r.Token)
	}
	is304 := func(r simRequests) bool { return isGet(r) && r.Status == http.StatusNotModified }
	gets := total(b.byToken(isGet)) - total(a.byToken(isGet))
	if gets == 0 {
		return math.NaN()
	}
	return float64(total(b.byToken(is304))-total(a.byToken(is304))) / float64(gets)
}

// pick returns the entries of m whose keys are among tokens.
func pick(m map[string]int64, tokens []string) map[string]int64 {
	out := make(map[string]int64, len(tokens))
	for _, t := range tokens {
		out[t] = m[t]
	}
	return out
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
