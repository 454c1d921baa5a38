package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"iterion.dev/iterion/internal/clock"
)

// pollEvery is how often the takeover and fault scenarios poll the
// simulator's counts: the resolution of the delays they measure, which can
// only come out late by up to this much.
const pollEvery = 10 * time.Millisecond

// sample is the simulator's per-token request counts at one instant:
// counts the sweeper's (every route but the issues list), board the board
// sync's.
type sample struct {
	at     time.Time
	counts map[string]int64
	board  map[string]int64
}

// boardSamples returns ss with the board sync's counts in place of the
// sweeper's, for the functions that read counts.
func boardSamples(ss []sample) []sample {
	out := make([]sample, len(ss))
	for i, s := range ss {
		out[i] = sample{at: s.at, counts: s.board}
	}
	return out
}

// sampleOf is the simulator's stats st, read at at, as a sample: the
// board sync's issue-list requests counted apart from the sweeper's, so
// that neither net's rate or active replicas include the other's.
func sampleOf(at time.Time, st simStats) sample {
	return sample{at: at, counts: st.byToken(isSweep), board: st.byToken(isBoard)}
}

// sampler polls the simulator's counts in the background, the ground truth
// every figure is computed from.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	got    []sample
	err    error
}

// startSampler polls s every `every` until stop.
func startSampler(ctx context.Context, s sim, every time.Duration) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	sp := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sp.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			st, err := s.stats(ctx)
			at := time.Now()
			sp.mu.Lock()
			if err != nil && ctx.Err() == nil {
				sp.err = err
			} else if err == nil {
				sp.got = append(sp.got, sampleOf(at, st))
			}
			sp.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return sp
}

// stop ends the polling and returns every sample, or the first error.
func (sp *sampler) stop() ([]sample, error) {
	sp.cancel()
	<-sp.done
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.err != nil {
		return sp.got, fmt.Errorf("%w: sampling the simulator: %w", ErrMeasure, sp.err)
	}
	return sp.got, nil
}

// sumOf is the total of the tokens' counts in one sample.
func sumOf(s sample, tokens []string) int64 {
	var n int64
	for _, t := range tokens {
		n += s.counts[t]
	}
	return n
}

// slopePerSecond is the least-squares slope of the tokens' summed counts over
// time. The counts grow in steps, one per sweep pass; a fit over many steps
// measures the rate without the ±1-pass error of a difference of two samples.
func slopePerSecond(ss []sample, tokens []string) float64 {
	if len(ss) < 2 {
		return 0
	}
	t0 := ss[0].at
	var n, sx, sy, sxx, sxy float64
	for _, s := range ss {
		x := s.at.Sub(t0).Seconds()
		y := float64(sumOf(s, tokens))
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// increases returns, per token, the instants of the samples at which its
// count had grown since the previous sample.
func increases(ss []sample) map[string][]time.Time {
	out := map[string][]time.Time{}
	for i := 1; i < len(ss); i++ {
		for tok, n := range ss[i].counts {
			if n > ss[i-1].counts[tok] {
				out[tok] = append(out[tok], ss[i].at)
			}
		}
	}
	return out
}

// activeIn returns the tokens, among those given (all when nil), whose counts
// grew between from and to.
func activeIn(ss []sample, from, to time.Time, among []string) []string {
	var out []string
	for tok, ats := range increases(ss) {
		if among != nil && !slices.Contains(among, tok) {
			continue
		}
		for _, at := range ats {
			if !at.Before(from) && !at.After(to) {
				out = append(out, tok)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// activeThroughout is activeIn over the whole span of ss. Fewer than two
// samples show nobody's count growing: a sampler stopped before its second
// poll (its context done, the simulator not answering) measured nothing,
// which is an error wrapping ErrMeasure, not a verdict that nobody sent.
func activeThroughout(ss []sample, among []string) ([]string, error) {
	if len(ss) < 2 {
		return nil, fmt.Errorf("%w: %d samples of the simulator's counts, want at least 2 to see who sent requests", ErrMeasure, len(ss))
	}
	return activeIn(ss, ss[0].at, ss[len(ss)-1].at, among), nil
}

// median returns the median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// maxOf returns the largest of ds (0 for none).
func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

// pollUntil calls cond with fresh simulator stats every `every` until it
// returns true, and returns the instant of the stats that satisfied it.
func pollUntil(ctx context.Context, s sim, every, timeout time.Duration, cond func(simStats) bool) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := s.stats(ctx)
		at := time.Now()
		if err == nil && cond(st) {
			return at, nil
		}
		if at.After(deadline) {
			if err != nil {
				return at, fmt.Errorf("%w: %w", ErrMeasure, err)
			}
			return at, fmt.Errorf("%w: condition not met within %v", ErrMeasure, timeout)
		}
		if !clock.Sleep(ctx, every) {
			return at, ctx.Err()
		}
	}
}

// grown returns the tokens among those given whose sweeper requests (the
// board sync's excluded, as in sampleOf) grew from a to b: a follower
// syncing the board is not a successor sweeping.
func grown(a, b simStats, tokens []string) []string {
	ca, cb := a.byToken(isSweep), b.byToken(isSweep)
	var out []string
	for _, t := range tokens {
		if cb[t] > ca[t] {
			out = append(out, t)
		}
	}
	return out
}

// change is a watched value first read by the poll answered at `at`,
// while the poll before it, sent at `since`, still read the previous
// value: the change happened in (since, at], the watch's polling
// resolution. A poll reads the value at some instant between its sending
// and its answer, so only the earlier poll's sending bounds the change
// from below: its answer may come back after the value changed.
type change[T comparable] struct {
	since, at time.Time
	v         T
}

// watch polls a value in the background and keeps its changes; a poll that
// fails is skipped (the value is unknown then, not changed).
type watch[T comparable] struct {
	cancel context.CancelFunc
	done   chan struct{}
	got    []change[T]
}

// startWatch polls read every `every` until stop. The first successful poll
// is the first change, with a zero since; each later change's since is
// when the successful poll before it was sent.
func startWatch[T comparable](ctx context.Context, every time.Duration, read func(context.Context) (T, error)) *watch[T] {
	ctx, cancel := context.WithCancel(ctx)
	w := &watch[T]{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var last time.Time // when the last successful poll was sent
		for {
			sent := time.Now()
			v, err := read(ctx)
			at := time.Now()
			if err == nil {
				if n := len(w.got); n == 0 || w.got[n-1].v != v {
					w.got = append(w.got, change[T]{since: last, at: at, v: v})
				}
				last = sent
			}
			if !clock.Sleep(ctx, every) {
				return
			}
		}
	}()
	return w
}

// stop ends the polling and returns every change seen.
func (w *watch[T]) stop() []change[T] {
	w.cancel()
	<-w.done
	return w.got
}

// firstChange returns the first change after t to a value for which ok
// holds.
func firstChange[T comparable](cs []change[T], t time.Time, ok func(T) bool) (change[T], bool) {
	for _, c := range cs {
		if c.at.After(t) && ok(c.v) {
			return c, true
		}
	}
	return change[T]{}, false
}

// percentile is the nearest-rank p-th percentile of ds (0 for none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

// percentileName names percentile(ds, p) of n durations for a report: "max"
// when its nearest rank is the last, as a p99 of fewer than 100 is, else
// "p" and p. A p99 of 2 probes is their slower one, and says so.
func percentileName(p, n int) string {
	if (p*n+99)/100 >= n {
		return "max"
	}
	return fmt.Sprintf("p%d", p)
}

// pick returns the entries of m whose keys are among tokens.
func pick(m map[string]int64, tokens []string) map[string]int64 {
	out := make(map[string]int64, len(tokens))
	for _, t := range tokens {
		out[t] = m[t]
	}
	return out
}

// total is the sum of m's values.
func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
