package harness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSoleSweeperWithoutSamplesIsAnError pins soleSweeper's answer when
// its sampler took no sample (here its context was done before the first
// poll): an error wrapping ErrMeasure, not an index out of range, and no
// check recorded, since nothing was measured.
func TestSoleSweeperWithoutSamplesIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"requests":[]}`))
	}))
	defer srv.Close()
	c := &cluster{interval: 50 * time.Millisecond, sim: sim{url: srv.URL, hc: srv.Client()}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var res FaultResult
	err := soleSweeper(ctx, c, &res, "one replica sweeps")
	if !errors.Is(err, ErrMeasure) {
		t.Errorf("got %v, want an error wrapping ErrMeasure: no samples is no measurement", err)
	}
	if len(res.Checks) != 0 {
		t.Errorf("got checks %v, want none: a check needs a measurement", res.Checks)
	}
}

// TestActiveThroughoutNeedsTwoSamples pins the helper the cost scenario
// and soleSweeper count sweepers with: fewer than two samples show
// nobody's count growing, so they are an error, not "nobody sent".
func TestActiveThroughoutNeedsTwoSamples(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int, a, b int64) sample {
		return sample{at: t0.Add(time.Duration(ms) * time.Millisecond), counts: map[string]int64{"a": a, "b": b}}
	}
	for _, c := range []struct {
		why string
		ss  []sample
	}{
		{"no sample: the sampler stopped before its first poll", nil},
		{"one sample: no growth can show", []sample{at(0, 5, 5)}},
	} {
		if got, err := activeThroughout(c.ss, []string{"a", "b"}); !errors.Is(err, ErrMeasure) {
			t.Errorf("%s: got %v, %v; want an error wrapping ErrMeasure", c.why, got, err)
		}
	}
	got, err := activeThroughout([]sample{at(0, 5, 5), at(50, 6, 5), at(100, 7, 5)}, []string{"a", "b"})
	if err != nil || len(got) != 1 || got[0] != "a" {
		t.Errorf("got %v, %v; want [a]: a's count grew over the samples, b's did not", got, err)
	}
}

// TestFaultResultOKNeedsEveryRunRepairedInTime pins a fault's verdict:
// every check held, every drifted run repaired, and the repair within the
// bound (inclusive); any one missing fails it.
func TestFaultResultOKNeedsEveryRunRepairedInTime(t *testing.T) {
	ok := FaultResult{Drifted: 4, Repaired: 4, RepairAfter: time.Second, Bound: time.Second, Checks: []Check{{Rule: "r", OK: true}}}
	if !ok.OK() {
		t.Errorf("got not OK at the bound, want OK: the bound is inclusive")
	}
	for _, c := range []struct {
		name string
		miss func(*FaultResult)
	}{
		{"a run not repaired", func(f *FaultResult) { f.Repaired-- }},
		{"repaired after the bound", func(f *FaultResult) { f.RepairAfter += time.Millisecond }},
		{"a check failed", func(f *FaultResult) { f.Checks = append(f.Checks, Check{Rule: "s", OK: false}) }},
	} {
		f := ok
		c.miss(&f)
		if f.OK() {
			t.Errorf("%s: got OK, want not", c.name)
		}
	}
}
