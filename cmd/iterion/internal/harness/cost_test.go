package harness

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

// scriptedNet is one replica's scripted requests of one net (the sweep or
// the board sync), from start on: a first, deep pass of deep requests
// spread over nine tenths of an interval, each charged deepPoints, then a
// pass of steady requests every interval, charged points (GraphQL's, on
// the sweep).
type scriptedNet struct {
	start              time.Duration // from the script's start; 0: the replica never sends
	deep, steady       int64
	deepPoints, points int64
}

// count is how many requests the net had sent since the script's start,
// and the points they were charged.
func (n scriptedNet) count(since time.Duration, iv time.Duration) (requests, points int64) {
	if n.start == 0 || since < n.start {
		return 0, 0
	}
	in := since - n.start
	deepSpan := iv * 9 / 10
	if in < deepSpan {
		r := min(n.deep, 1+n.deep*int64(in)/int64(deepSpan))
		return r, r * n.deepPoints
	}
	k := int64(in / iv)
	return n.deep + n.steady*k, n.deep*n.deepPoints + n.points*k
}

// costWorld scripts the cost scenario's simulator and replicas: each
// replica's sweep and board sync, read by the simulator's GET /_sim/stats
// and by its own transport's counts on /metrics (answered metricsTakes
// after it is asked, reading the counts at the asking).
type costWorld struct {
	iv           time.Duration
	start        time.Time
	sweep, board []scriptedNet // by replica
	metricsTakes time.Duration
}

func (w costWorld) counts(i int, at time.Time) (sweep, points, board int64) {
	sweep, points = w.sweep[i].count(at.Sub(w.start), w.iv)
	board, _ = w.board[i].count(at.Sub(w.start), w.iv)
	return sweep, points, board
}

// cluster returns a cluster of the world's replicas, named replica-01 on.
func (w costWorld) cluster(t *testing.T) *cluster {
	simMux := http.NewServeMux()
	simMux.HandleFunc("GET /_sim/stats", func(rw http.ResponseWriter, r *http.Request) {
		var st simStats
		for i := range w.sweep {
			s, p, b := w.counts(i, time.Now())
			tok := fmt.Sprintf("replica-%02d", i+1)
			st.Requests = append(st.Requests,
				simRequests{Token: tok, Method: http.MethodPost, Route: graphqlRoute, Status: http.StatusOK, Count: s, Points: p},
				simRequests{Token: tok, Method: http.MethodGet, Route: boardRoute, Status: http.StatusOK, Count: b, Points: b})
		}
		writeJSON(t, rw, st)
	})
	c := &cluster{interval: w.iv, sim: scriptedSim(simMux)}
	for i := range w.sweep {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(rw http.ResponseWriter, r *http.Request) {
			s, _, b := w.counts(i, time.Now())
			time.Sleep(w.metricsTakes)
			fmt.Fprintf(rw, "# TYPE forge_http_requests_total counter\nforge_http_requests_total{lane=%q} %d\nforge_http_requests_total{lane=%q} %d\n",
				forge.LaneMergeGateSweeper, s, forge.LaneBoardSync, b)
		})
		name := fmt.Sprintf("replica-%02d", i+1)
		r, _ := scriptedReplica(t, name, "owner-"+name, mux)
		c.replicas = append(c.replicas, r)
	}
	return c
}

// TestCostMeasuresTheSteadyStateAfterTheWarmUp pins the cost scenario's
// window and its per-interval figures, in virtual time on a scripted
// simulator and replicas. Each replica's first pass of each net is deep
// (100 sweep requests of a GraphQL point each, 60 board ones, spread
// over nine tenths of an interval);
// every pass after it is steady (4 sweep requests charged 3 GraphQL
// points, 2 board requests), one an interval. The window opens only once
// every replica that should (one with the lease) has sent requests of
// both nets, the sweep's and the board sync's, whichever comes later, and
// one interval after that, so that no deep first pass falls in it; the
// rates are then the steady passes' alone: requests per interval are the
// sampled counts' slope times the interval (2 s here, so that neither a
// rate per second nor one per minute passes for it), and GraphQL points
// per interval the points counted between the window's two reads of the
// simulator over the time between them.
func TestCostMeasuresTheSteadyStateAfterTheWarmUp(t *testing.T) {
	const iv = 2 * time.Second
	// 7 ms off the 20 ms polls, so that no pass lands on a sample.
	early, late := iv*5/2+7*time.Millisecond, iv*11/2+7*time.Millisecond
	sweep := func(at time.Duration) scriptedNet {
		return scriptedNet{start: at, deep: 100, steady: 4, deepPoints: 1, points: 3}
	}
	board := func(at time.Duration) scriptedNet { return scriptedNet{start: at, deep: 60, steady: 2} }
	for _, tc := range []struct {
		name         string
		lease        bool
		sweep, board []scriptedNet
		senders      int
	}{
		{"the board synced from later than the sweep", false,
			[]scriptedNet{sweep(early), sweep(early)}, []scriptedNet{board(late), board(late)}, 2},
		{"the sweep from later than the board", false,
			[]scriptedNet{sweep(early), sweep(late)}, []scriptedNet{board(early), board(early)}, 2},
		{"with the lease, one replica of two", true,
			[]scriptedNet{sweep(early), {}}, []scriptedNet{board(late), {}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := costWorld{iv: iv, start: time.Now(), sweep: tc.sweep, board: tc.board, metricsTakes: iv / 20}
				c := w.cluster(t)
				s := costScenario{window: 30 * iv, logf: t.Logf}
				row, err := s.measure(t.Context(), c, c.replicas, tc.lease)
				if err != nil {
					t.Fatal(err)
				}
				near := func(got, want float64) bool { return math.Abs(got-want) <= 0.01*want }
				n := float64(tc.senders)
				if !near(row.PerInterval, 4*n) || !near(row.BoardPerInterval, 2*n) {
					t.Errorf("got %.2f sweep and %.2f board requests per interval, want %.0f and %.0f ± 1%%: the steady passes' alone, no deep first pass in the window",
						row.PerInterval, row.BoardPerInterval, 4*n, 2*n)
				}
				perMinute := 60 / iv.Seconds()
				if row.PerMinute != row.PerInterval*perMinute || row.BoardPerMinute != row.BoardPerInterval*perMinute {
					t.Errorf("got %.2f and %.2f per minute for %.2f and %.2f per interval of %v, want %v times as many: the same rate per minute",
						row.PerMinute, row.BoardPerMinute, row.PerInterval, row.BoardPerInterval, iv, perMinute)
				}
				if row.GraphQLPerInterval != 3*n {
					t.Errorf("got %.4f GraphQL points per interval, want %.0f: the points between the window's two reads over the time between them", row.GraphQLPerInterval, 3*n)
				}
				if row.Sweepers != tc.senders || row.BoardSyncers != tc.senders || !row.Agree() || !row.BoardAgree() {
					t.Errorf("got %d sweepers, %d syncers, sim %d/%d transport %d/%d; want %d each and the counts agreeing",
						row.Sweepers, row.BoardSyncers, row.Sim, row.BoardSim, row.Transport, row.BoardTransport, tc.senders)
				}
			})
		})
	}
}
