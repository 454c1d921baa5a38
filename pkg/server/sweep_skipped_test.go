package server

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/gaterun"
)

// currentOfferer answers every run current and keeps the IDs it was
// offered.
type currentOfferer struct {
	mu      sync.Mutex
	offered []string
}

func (o *currentOfferer) Offer(_ context.Context, run gaterun.Run) (outcome, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.offered = append(o.offered, run.ID)
	return outcomeCurrent, nil
}

func (o *currentOfferer) OfferBatch(ctx context.Context, runs []gaterun.Run) ([]outcome, error) {
	outs := make([]outcome, len(runs))
	for i, r := range runs {
		outs[i], _ = o.Offer(ctx, r)
	}
	return outs, nil
}

// TestASweepPassSkipsARunDocumentItCannotReadAndTellsOfItOnce pins what a
// sweep does with a gate_runs document the store cannot read as a run (a
// verdict no release writes, as a replica of another release or a hand
// edit may leave): the pass lists and offers every other run and is
// complete; it logs the document's _id and the field at fault once, and
// counts it once in merge_gate_sweep_malformed_runs_total, however many of
// its listings met it (a term's first pass reads the shallow window, then
// the deep one, and both hold it); the next pass tells of it again.
// Before, the listing failed at the document: "sweep stopped: cannot list
// runs", every pass, and no run after it was swept.
func TestASweepPassSkipsARunDocumentItCannotReadAndTellsOfItOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	db := mongotest.DB(t)
	runs, err := gaterun.NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for pull := 1; pull <= 3; pull++ {
		r := gaterun.Run{ID: gaterun.ID("github.com", "acme/app", pull, "abc"), Host: "github.com", Repo: "acme/app", Pull: pull,
			HeadSHA: "abc", Context: gaterun.DefaultContext, Verdict: gaterun.VerdictSuccess}
		if _, err := runs.Put(ctx, r, now.Add(time.Duration(pull-10)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
	}
	at := now.Add(-8 * time.Minute) // between the runs, in both windows
	bad := bson.D{{Key: "_id", Value: "bad-run"}, {Key: "host", Value: "github.com"}, {Key: "repo", Value: "acme/app"}, {Key: "repo_key", Value: "acme/app"},
		{Key: "pull", Value: 9}, {Key: "head_sha", Value: "abc"}, {Key: "context", Value: "iterion/review"}, {Key: "verdict", Value: "approved"},
		{Key: "created_at", Value: at}, {Key: "updated_at", Value: at}, {Key: "reported_at", Value: at}, {Key: "settled", Value: false}}
	if _, err := db.Collection(gaterun.Collection).InsertOne(ctx, bad); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	malformed := prometheus.NewCounter(prometheus.CounterOpts{Name: "malformed"})
	offer := &currentOfferer{}
	sw := newSweeper(sweeperConfig{Runs: runs, Offer: offer, Interval: time.Minute, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Malformed: malformed})
	st := sw.newTerm()
	for pass := 1; pass <= 2; pass++ {
		p, _ := sw.pass(ctx, st)
		if !p.Complete || !p.ShallowDone {
			t.Errorf("pass %d: complete %v, shallow window done %v; want both: a document the store cannot read stops no pass", pass, p.Complete, p.ShallowDone)
		}
		offer.mu.Lock()
		offered := slices.Sorted(slices.Values(offer.offered))
		offer.offered = nil
		offer.mu.Unlock()
		if !slices.Equal(offered, slices.Sorted(slices.Values(want))) {
			t.Errorf("pass %d offered %v, want the 3 runs %v: every other run is swept", pass, offered, want)
		}
		var told []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "sweep skipped a run document") {
				told = append(told, line)
			}
		}
		if len(told) != pass || !strings.Contains(told[pass-1], "run=bad-run") || !strings.Contains(told[pass-1], "verdict") {
			t.Errorf("after pass %d, the log tells of the skipped document %d times: %q; want %d, naming run=bad-run and the field verdict: once a pass", pass, len(told), told, pass)
		}
		if got := testutil.ToFloat64(malformed); got != float64(pass) {
			t.Errorf("after pass %d, merge_gate_sweep_malformed_runs_total = %v, want %d: the document counts once a pass", pass, got, pass)
		}
		if strings.Contains(logs.String(), "cannot list runs") {
			t.Errorf("pass %d logged %q: the listing failed at the document", pass, logs.String())
		}
		now = now.Add(time.Minute)
	}
}
