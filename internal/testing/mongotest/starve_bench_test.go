package mongotest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/clock"
	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// BenchmarkLeaderStabilityUnderLoad measures what the proxy's queues do to
// an idle lease under read load (a proxy that forwards one exchange at a time
// starves the sweeper's lease): 3,500 gate_runs documents, four clients each reading the whole
// collection in a loop (the API's and the sweeper's scans), and three
// candidates running lease.Run on the merge-gate sweeper's lease at a 500 ms
// interval (TTL 1.5 s, retry 500 ms) with idle work, for window, once with
// the old global queue and once per collection, side by side in one run:
//
//	go test -run '^$' -bench LeaderStabilityUnderLoad -benchtime 1x ./internal/mongotest
//
// It reports leader changes (elections after the first), step-downs by
// deadline, and the longest span with no leader, from Run's own events.
func BenchmarkLeaderStabilityUnderLoad(b *testing.B) {
	const (
		docs       = 3500
		readers    = 4
		candidates = 3
		interval   = 500 * time.Millisecond
		window     = 30 * time.Second
	)
	for _, q := range []struct {
		name  string
		queue mongotest.Queue
	}{{"global", mongotest.QueueGlobal}, {"per-collection", mongotest.QueuePerCollection}} {
		b.Run(q.name, func(b *testing.B) {
			for range b.N {
				srv := mongotest.NewServer(b)
				srv.Proxy().SetQueue(q.queue)
				db := srv.DB(b)
				seedGateRuns(b, db.Collection("gate_runs"), docs)

				ctx, cancel := context.WithTimeout(context.Background(), window)
				var wg sync.WaitGroup
				for range readers {
					coll := srv.Client(b).Database(db.Name()).Collection("gate_runs")
					wg.Go(func() {
						for ctx.Err() == nil {
							cur, err := coll.Find(ctx, bson.D{})
							if err != nil {
								continue
							}
							var all []bson.Raw
							_ = cur.All(ctx, &all)
						}
					})
				}
				var st stability
				start := time.Now()
				for i := range candidates {
					store := mongolease.NewStore(srv.Client(b).Database(db.Name()))
					spec := lease.Spec{
						Name: "merge-gate-sweeper", Owner: fmt.Sprintf("replica-%d", i+1),
						TTL: 3 * interval, Retry: interval, OnEvent: st.record,
					}
					wg.Go(func() {
						if err := lease.Run(ctx, store, spec, func(ctx context.Context) { <-ctx.Done() }); err != nil {
							b.Errorf("lease.Run: %v", err)
						}
					})
				}
				clock.Sleep(ctx, window)
				end := time.Now()
				cancel()
				wg.Wait()
				changes, deadline, gap := st.summary(start, end)
				b.ReportMetric(float64(changes), "leader-changes")
				b.ReportMetric(float64(deadline), "deadline-stepdowns")
				b.ReportMetric(gap.Seconds(), "max-leaderless-s")
				b.Logf("queue %s: %d leader changes, %d step-downs by deadline, longest leaderless %v over %v",
					q.name, changes, deadline, gap.Round(time.Millisecond), end.Sub(start).Round(time.Second))
			}
		})
	}
}

// seedGateRuns inserts n documents shaped like pkg/gaterun's gating runs.
func seedGateRuns(b *testing.B, coll *mongo.Collection, n int) {
	b.Helper()
	now := time.Now().UTC()
	for lo := 0; lo < n; lo += 500 {
		var batch []any
		for i := lo; i < min(n, lo+500); i++ {
			batch = append(batch, bson.D{
				{Key: "_id", Value: fmt.Sprintf("github.com/acme/app/%d/%040d", i, i)},
				{Key: "forge", Value: "github.com"}, {Key: "repo", Value: "acme/app"},
				{Key: "pull", Value: i}, {Key: "head_sha", Value: fmt.Sprintf("%040d", i)},
				{Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "success"},
				{Key: "description", Value: "review passed"}, {Key: "target_url", Value: "https://ci.example.com/runs/" + fmt.Sprint(i)},
				{Key: "created", Value: now}, {Key: "updated", Value: now}, {Key: "settled", Value: false},
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := coll.InsertMany(ctx, batch)
		cancel()
		if err != nil {
			b.Fatalf("seed gate_runs: %v", err)
		}
	}
}

// stability follows the lease's holders from Run's events.
type stability struct {
	mu     sync.Mutex
	events []lease.Event
}

func (s *stability) record(e lease.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

// summary returns the elections after the first, the step-downs by
// deadline, and the longest span of [start, end] in which no candidate held
// the lease.
func (s *stability) summary(start, end time.Time) (changes, deadline int, gap time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holders := 0
	since := start // when the lease last had no holder; zero while held
	elections := 0
	for _, e := range s.events {
		switch e.Kind {
		case lease.Elected:
			elections++
			if holders == 0 && !since.IsZero() {
				gap = max(gap, e.At.Sub(since))
				since = time.Time{}
			}
			holders++
		case lease.SteppedDown:
			if e.Reason == lease.ReasonDeadline {
				deadline++
			}
			holders--
			if holders == 0 && e.At.Before(end) {
				since = e.At
			}
		}
	}
	if !since.IsZero() {
		gap = max(gap, end.Sub(since))
	}
	return max(0, elections-1), deadline, gap
}
