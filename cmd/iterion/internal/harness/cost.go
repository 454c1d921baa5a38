package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/server"
)

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
	// Discarded is why each earlier measurement of this configuration was
	// discarded (errHandover, with the replicas' step-downs), in order.
	Discarded []string
}

// Agree reports whether the transport's sweeper counts equal the
// simulator's.
func (r CostRow) Agree() bool { return r.Sim == r.Transport }

// BoardAgree reports whether the transport's board sync counts equal the
// simulator's.
func (r CostRow) BoardAgree() bool { return r.BoardSim == r.BoardTransport }

// costScenario measures the sweep's and the board sync's request rates
// for every replica count, without and then with the lease, each
// configuration on fresh replicas.
type costScenario struct {
	ns     []int         // the replica counts
	window time.Duration // how long each configuration is measured
	logf   func(format string, args ...any)
}

// run measures every configuration on c and returns a row for each, in
// order; on an error, the rows measured before it.
func (s costScenario) run(ctx context.Context, c *cluster) ([]CostRow, error) {
	var rows []CostRow
	for _, lease := range []bool{false, true} {
		for _, n := range s.ns {
			what := fmt.Sprintf("N=%-2d lease=%-5v", n, lease)
			row, discarded, err := remeasured(s.logf, what, func() (CostRow, error) { return s.one(ctx, c, n, lease) })
			if errors.Is(err, errHandover) {
				return rows, fmt.Errorf("N=%d lease=%v: %w", n, lease, err)
			}
			if err != nil {
				return rows, err
			}
			row.Discarded = discarded
			rows = append(rows, row)
			s.logf("N=%-2d lease=%-5v %8.0f req/min  %6.1f req/interval  sweepers %d  sim %d transport %d; board %5.0f req/min  %4.1f req/interval  syncers %d  sim %d transport %d",
				n, lease, row.PerMinute, row.PerInterval, row.Sweepers, row.Sim, row.Transport,
				row.BoardPerMinute, row.BoardPerInterval, row.BoardSyncers, row.BoardSim, row.BoardTransport)
		}
	}
	return rows, nil
}

// one measures n fresh replicas, with the lease or without it.
func (s costScenario) one(ctx context.Context, c *cluster, n int, lease bool) (CostRow, error) {
	board := []string{"--board-repos", boardRepo, "--board-interval", c.interval.String()}
	rs, err := c.startReplicas(ctx, n, replicaSpec{noLease: !lease, extra: board})
	if err != nil {
		return CostRow{}, err
	}
	defer c.stopAll()
	return s.measure(ctx, c, rs, lease)
}

// measure is one's measurement of rs, just started, with the lease or
// without it: their warm-up, then the window, its figures from the
// simulator's counts sampled throughout it, and the counts' agreement.
func (s costScenario) measure(ctx context.Context, c *cluster, rs []*replica, lease bool) (CostRow, error) {
	n := len(rs)
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
	if _, err := pollUntil(ctx, c.sim, 20*time.Millisecond, 10*c.interval+10*time.Second, func(st simStats) bool {
		return active(st.byToken(isSweep)) >= want && active(st.byToken(isBoard)) >= want
	}); err != nil {
		return CostRow{}, fmt.Errorf("N=%d lease=%v: %d replicas never swept and synced the board: %w", n, lease, want, err)
	}
	clock.Sleep(ctx, c.interval)
	// With the lease, a window in which either lease changed hands is
	// measured again (remeasured); without it, no replica holds a term.
	leases := []string{server.MergeGateSweeper().Name, server.ForgeBoardSync().Name}
	turns0, err := turnsOf(ctx, rs, leases...)
	if err != nil {
		return CostRow{}, err
	}
	st0, err := c.sim.stats(ctx)
	if err != nil {
		return CostRow{}, err
	}
	t0 := time.Now()
	sp := startSampler(ctx, c.sim, 20*time.Millisecond)
	clock.Sleep(ctx, s.window)
	ss, err := sp.stop()
	if err != nil {
		return CostRow{}, err
	}
	st1, err := c.sim.stats(ctx)
	if err != nil {
		return CostRow{}, err
	}
	t1 := time.Now()
	turns1, err := turnsOf(ctx, rs, leases...)
	if err != nil {
		return CostRow{}, err
	}
	if err := handoversBetween(rs, turns0, turns1); err != nil {
		return CostRow{}, err
	}
	sweepers, err := activeThroughout(ss, tokens)
	if err != nil {
		return CostRow{}, err
	}
	rate := slopePerSecond(ss, tokens)
	bs := boardSamples(ss)
	syncers, err := activeThroughout(bs, tokens)
	if err != nil {
		return CostRow{}, err
	}
	boardRate := slopePerSecond(bs, tokens)
	row := CostRow{
		Replicas:           n,
		Lease:              lease,
		PerMinute:          rate * 60,
		PerInterval:        rate * c.interval.Seconds(),
		Sweepers:           len(sweepers),
		Share304:           share304(st0, st1, tokens),
		GraphQLPerInterval: graphQLPerInterval(st0, st1, tokens, t1.Sub(t0), c.interval),
		BoardPerMinute:     boardRate * 60,
		BoardPerInterval:   boardRate * c.interval.Seconds(),
		BoardSyncers:       len(syncers),
	}
	sweep, boardSync, err := agreement(ctx, c, rs)
	row.Sim, row.Transport = sweep.sim, sweep.transport
	row.BoardSim, row.BoardTransport = boardSync.sim, boardSync.transport
	return row, err
}

// graphQLPerInterval is the GraphQL points the tokens were charged between
// the simulator's counts a and b, read span apart, per interval: the
// points over the span between the two reads that counted them, not over
// the reads that follow b.
func graphQLPerInterval(a, b simStats, tokens []string, span, interval time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	points := total(pick(b.pointsByToken(isGraphQL), tokens)) - total(pick(a.pointsByToken(isGraphQL), tokens))
	return float64(points) * float64(interval) / float64(span)
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
func agreement(ctx context.Context, c *cluster, rs []*replica) (sweep, board tally, err error) {
	for _, r := range rs {
		s, b, err := agreementOf(ctx, c, r)
		if err != nil {
			return tally{}, tally{}, err
		}
		sweep.sim, sweep.transport = sweep.sim+s.sim, sweep.transport+s.transport
		board.sim, board.transport = board.sim+b.sim, board.transport+b.transport
	}
	return sweep, board, nil
}

// agreementOf is agreement's reading of one replica.
func agreementOf(ctx context.Context, c *cluster, r *replica) (sweep, board tally, err error) {
	quiet := false
	for range 100 {
		before, err := r.api.transportCounts(ctx)
		if err != nil {
			return tally{}, tally{}, err
		}
		st, err := c.sim.stats(ctx)
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
		clock.Sleep(ctx, c.interval/7)
	}
	if !quiet {
		return tally{}, tally{}, fmt.Errorf("%w: %s never had a quiet instant to compare its transport's counts with the simulator's", ErrMeasure, r.name)
	}
	return sweep, board, nil
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
