package lease_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// The timing tests use TTL 3s: renew and cut every 1s, step down 2.5s after
// the last proven send (TTL/6 = 500ms before the store's expiry).
const (
	ttl      = 3 * time.Second
	leaseKey = "net"
)

// harness records, for the Runs of one synctest bubble, every event and every
// term as work saw it. Instants are virtual; t0 is the bubble's start.
type harness struct {
	t  *testing.T
	t0 time.Time

	mu     sync.Mutex
	events []lease.Event
	terms  []*termRec
	logs   syncBuffer
}

// termRec is one call of work: when it started, when its context was
// cancelled (the step-down) and when it returned; zero when not yet.
type termRec struct {
	Owner                      string
	Start, Cancelled, Returned time.Time
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, t0: time.Now()}
}

// at is the instant d after the bubble's start.
func (h *harness) at(d time.Duration) time.Time { return h.t0.Add(d) }

// since is the offset of instant x from the bubble's start.
func (h *harness) since(x time.Time) time.Duration { return x.Sub(h.t0) }

// sleepUntil sleeps until d after the bubble's start.
func (h *harness) sleepUntil(d time.Duration) { time.Sleep(time.Until(h.at(d))) }

// spec is the Spec of candidate owner, recording events and logging into
// h.logs as JSON.
func (h *harness) spec(owner string, retry time.Duration) lease.Spec {
	return lease.Spec{
		Name:    leaseKey,
		Owner:   owner,
		TTL:     ttl,
		Retry:   retry,
		Logger:  slog.New(slog.NewJSONHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent: h.record,
	}
}

func (h *harness) record(e lease.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

// work returns a work func for owner that records its term, then runs body
// (nil: wait for ctx to be done).
func (h *harness) work(owner string, body func(ctx context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		rec := &termRec{Owner: owner, Start: time.Now()}
		h.mu.Lock()
		h.terms = append(h.terms, rec)
		h.mu.Unlock()
		// Run cancels ctx at every step-down, even after work returned, so
		// this fires once per term; Terms waits for it.
		context.AfterFunc(ctx, func() {
			h.mu.Lock()
			rec.Cancelled = time.Now()
			h.mu.Unlock()
		})
		defer func() {
			h.mu.Lock()
			rec.Returned = time.Now()
			h.mu.Unlock()
		}()
		if body == nil {
			<-ctx.Done()
			return
		}
		body(ctx)
	}
}

// Terms returns a copy of owner's terms ("" for all), in start order, once
// every goroutine of the bubble is blocked, so that a step-down that just
// happened is on record.
func (h *harness) Terms(owner string) []termRec {
	synctest.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []termRec
	for _, r := range h.terms {
		if owner == "" || r.Owner == owner {
			out = append(out, *r)
		}
	}
	return out
}

// interval is a term as Run reported it: from its Elected event to its
// SteppedDown event. Seqs order events across Runs: OnEvent is called
// synchronously, Elected before work starts and SteppedDown right after
// work's context is cancelled and before the release, so the order of the
// recorded events is the order in which they happened, even within one
// virtual instant.
type interval struct {
	Owner               string
	Elected, Stepped    time.Time
	ElectedSeq, StepSeq int
}

// Intervals returns every term as the events report it, in election order;
// a term not stepped down has Stepped zero and StepSeq -1.
func (h *harness) Intervals() []interval {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []interval
	open := map[string]int{}
	for i, e := range h.events {
		switch e.Kind {
		case lease.Elected:
			open[e.Owner] = len(out)
			out = append(out, interval{Owner: e.Owner, Elected: e.At, ElectedSeq: i, StepSeq: -1})
		case lease.SteppedDown:
			if j, ok := open[e.Owner]; ok {
				out[j].Stepped, out[j].StepSeq = e.At, i
				delete(open, e.Owner)
			}
		}
	}
	return out
}

// Events returns owner's events of kind (0 for all kinds), in order.
func (h *harness) Events(owner string, kind lease.EventKind) []lease.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []lease.Event
	for _, e := range h.events {
		if (owner == "" || e.Owner == owner) && (kind == 0 || e.Kind == kind) {
			out = append(out, e)
		}
	}
	return out
}

// start runs Run in a goroutine; the channel yields its result.
func (h *harness) start(ctx context.Context, st lease.Store, spec lease.Spec, work func(context.Context)) <-chan error {
	done := make(chan error, 1)
	go func() { done <- lease.Run(ctx, st, spec, work) }()
	return done
}

// runUntil runs Run until d after the bubble's start, then cancels its ctx
// and waits for it to return nil.
func (h *harness) runUntil(d time.Duration, st lease.Store, spec lease.Spec, work func(context.Context)) {
	ctx, cancel := context.WithCancel(h.t.Context())
	done := h.start(ctx, st, spec, work)
	h.sleepUntil(d)
	cancel()
	if err := <-done; err != nil {
		h.t.Errorf("Run = %v, want nil once ctx is done: store failures are never returned", err)
	}
}

// logLine is one decoded JSON log record.
type logLine map[string]any

// Logs returns the records logged with message msg.
func (h *harness) Logs(msg string) []logLine {
	return h.logsWhere(func(l logLine) bool { return l["msg"] == msg })
}

// LogsAt returns the records logged at level, e.g. "WARN".
func (h *harness) LogsAt(level string) []logLine {
	return h.logsWhere(func(l logLine) bool { return l["level"] == level })
}

// logsWhere returns the records for which keep is true.
func (h *harness) logsWhere(keep func(logLine) bool) []logLine {
	var out []logLine
	for _, line := range bytes.Split(h.logs.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l logLine
		if err := json.Unmarshal(line, &l); err != nil {
			h.t.Errorf("log line %q is not JSON: %v", line, err)
			continue
		}
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of several
// loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// offsets maps instants to their offsets from t0, for failure messages.
func (h *harness) offsets(xs []time.Time) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = h.since(x)
	}
	return out
}

// callTimes returns the received instants of calls as offsets from t0.
func (h *harness) callTimes(calls []storeCall) []time.Duration {
	xs := make([]time.Time, len(calls))
	for i, c := range calls {
		xs[i] = c.At
	}
	return h.offsets(xs)
}
