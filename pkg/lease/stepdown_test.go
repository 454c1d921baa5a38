package lease_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// slowSink is a slog.Handler that blocks on every record whose message is
// in slow for delay (virtual time), and records, for each record, whether
// work's context was already cancelled when the record reached it.
type slowSink struct {
	slow  map[string]bool
	delay time.Duration

	mu        sync.Mutex
	workCtx   context.Context
	cancelled map[string]bool // message → work's ctx was done when it was handled
}

func (s *slowSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *slowSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *slowSink) WithGroup(string) slog.Handler            { return s }

func (s *slowSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	if s.workCtx != nil {
		s.cancelled[r.Message] = s.workCtx.Err() != nil
	}
	s.mu.Unlock()
	if s.slow[r.Message] {
		time.Sleep(s.delay)
	}
	return nil
}

func (s *slowSink) setWork(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workCtx = ctx
}

// TestStepDownPrecedesItsLogLineEvenWithASlowLogSink pins that the
// step-down (work's context cancelled) never waits for the logs: at the
// deadline, even while Run's goroutine is stuck 3s in a slow sink's "renew
// failed" record, and on a refusal; and that work's context is already
// cancelled when the "stepped down" record reaches the sink.
func TestStepDownPrecedesItsLogLineEvenWithASlowLogSink(t *testing.T) {
	for _, c := range []struct {
		name   string
		plan   func(storeCall) fault
		reason string
		at     time.Duration // the step-down: work's context cancelled
	}{
		// Renewals fail: "renew failed" at 1s blocks Run's goroutine until
		// 4s; the deadline is 2.5s.
		{"deadline", func(c storeCall) fault {
			if c.Op == "renew" {
				return fault{kind: fail}
			}
			return fault{}
		}, lease.ReasonDeadline, 2500 * time.Millisecond},
		// The renewal at 2s finds the lease another's.
		{"refused", func(c storeCall) fault {
			if c.Op == "renew" && c.N == 1 {
				return fault{kind: stolen}
			}
			return fault{}
		}, lease.ReasonRefused, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				sink := &slowSink{
					slow:      map[string]bool{"lease: renew failed": true, "lease: stepped down": true},
					delay:     3 * time.Second,
					cancelled: map[string]bool{},
				}
				spec := h.spec("a", time.Hour)
				spec.Logger = slog.New(sink)
				st := newTermFaultStore(lease.NewMemoryStore(), c.plan)
				h.runUntil(10*time.Second, st, spec, h.work("a", func(ctx context.Context) {
					sink.setWork(ctx)
					<-ctx.Done()
				}))
				terms := h.Terms("a")
				if len(terms) != 1 || terms[0].Cancelled != h.at(c.at) {
					t.Fatalf("got terms %+v, want one whose work's context is cancelled at %v: the step-down does not wait for a slow log sink", terms, c.at)
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if got, logged := sink.cancelled["lease: stepped down"]; !logged || !got {
					t.Errorf("got work's context cancelled=%v (logged %v) when the step-down reached the sink, want true: the step-down precedes its log line", got, logged)
				}
				if sd := h.Events("a", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != c.reason {
					t.Errorf("got step-downs %+v, want one with reason %q", sd, c.reason)
				}
			})
		})
	}
}

// TestRenewalAnsweredAfterAnOutageIsNotDelayedByASlowLog pins that a
// renewal answered after a failed one acts before the episode's end is
// logged: a refusal steps down, and a grant moves the deadline, as soon as
// the store answers, even while the sink takes 3s over "store reachable
// again". Renewals go out at 1s, 2s and 3s.
func TestRenewalAnsweredAfterAnOutageIsNotDelayedByASlowLog(t *testing.T) {
	const reachable = "lease: store reachable again"
	for _, c := range []struct {
		name   string
		plan   func(storeCall) fault
		until  time.Duration // Run's ctx is cancelled
		at     time.Duration // the step-down: work's context cancelled
		reason string
		why    string
		// stopped: work's context is cancelled when the reachable line
		// reaches the sink.
		stopped bool
	}{
		// The renewal at 1s is granted (deadline 3.5s), the one at 2s
		// fails, and the one at 3s finds the lease another's.
		{"refused", func(c storeCall) fault {
			switch {
			case c.Op == "renew" && c.N == 1:
				return fault{kind: fail}
			case c.Op == "renew" && c.N == 2:
				return fault{kind: stolen}
			}
			return fault{}
		}, 10 * time.Second, 3 * time.Second, lease.ReasonRefused, "the refusal steps down at once, before its episode's log line", true},
		// The renewal at 1s fails; the one at 2s is granted, which moves
		// the deadline from 2.5s to 4.5s.
		{"granted", func(c storeCall) fault {
			if c.Op == "renew" && c.N == 0 {
				return fault{kind: fail}
			}
			return fault{}
		}, 4 * time.Second, 4 * time.Second, lease.ReasonCanceled, "the grant at 2s moved the deadline to 4.5s before its episode's log line", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				sink := &slowSink{slow: map[string]bool{reachable: true}, delay: 3 * time.Second, cancelled: map[string]bool{}}
				spec := h.spec("a", time.Hour)
				spec.Logger = slog.New(sink)
				st := newTermFaultStore(lease.NewMemoryStore(), c.plan)
				h.runUntil(c.until, st, spec, h.work("a", func(ctx context.Context) {
					sink.setWork(ctx)
					<-ctx.Done()
				}))
				terms := h.Terms("a")
				if len(terms) != 1 || terms[0].Cancelled != h.at(c.at) {
					t.Errorf("got terms %+v, want one whose work's context is cancelled at %v: %s", terms, c.at, c.why)
				}
				if sd := h.Events("a", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != c.reason {
					t.Errorf("got step-downs %+v, want one with reason %q: %s", sd, c.reason, c.why)
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				if got, logged := sink.cancelled[reachable]; !logged || got != c.stopped {
					t.Errorf("got work's context cancelled=%v (logged %v) when %q reached the sink, want %v: %s", got, logged, reachable, c.stopped, c.why)
				}
			})
		})
	}
}

// TestStepDownDeadlineKeepsTheMonotonicReading pins that the deadline is an
// instant on the monotonic clock. synctest's clock cannot jump its wall
// reading, so the test checks the property that makes a jump harmless: the
// deadline computed from a send instant read by time.Now keeps its monotonic
// reading ("m=" in its String), so time.Until and the timers measure it on
// the monotonic clock. Expiry alone (UTC, truncated) would drop it.
func TestStepDownDeadlineKeepsTheMonotonicReading(t *testing.T) {
	sent := time.Now()
	if !strings.Contains(sent.String(), "m=") {
		t.Fatalf("time.Now() = %v has no monotonic reading: the test's premise", sent)
	}
	if strings.Contains(lease.Expiry(sent, ttl).String(), "m=") {
		t.Fatalf("Expiry keeps the monotonic reading; the test would not tell the deadline from it")
	}
	d := lease.StepDownDeadline(ttl, sent)
	if !strings.Contains(d.String(), "m=") {
		t.Errorf("got deadline %v, want it to keep sent's monotonic reading: a wall-clock jump must not move the step-down", d)
	}
	// Monotonic arithmetic and wall arithmetic agree on the offset.
	if got, want := d.Sub(sent), lease.Expiry(sent, ttl).Sub(sent.Round(0))-ttl/6; got != want {
		t.Errorf("got deadline sent+%v, want sent+%v: expiry − TTL/6", got, want)
	}
}

// TestStepDownMarginHoldsForUnevenTTLsAndSubMillisecondSends pins that Run
// steps down exactly TTL/6 before the store's expiry of the winning send,
// never later, for TTLs that are not whole milliseconds and sends at
// sub-millisecond offsets (the store truncates to the millisecond).
func TestStepDownMarginHoldsForUnevenTTLsAndSubMillisecondSends(t *testing.T) {
	for _, ttl := range []time.Duration{3700 * time.Microsecond, 1000300 * time.Microsecond} {
		for _, offset := range []time.Duration{0, time.Nanosecond, 250 * time.Microsecond, 500 * time.Microsecond, 999999 * time.Nanosecond} {
			t.Run(fmt.Sprintf("ttl %v send +%v", ttl, offset), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					time.Sleep(offset)
					mem := lease.NewMemoryStore()
					st := newTermFaultStore(mem, func(c storeCall) fault {
						if c.Op == "renew" {
							return fault{kind: fail}
						}
						return fault{}
					})
					spec := h.spec("a", time.Hour)
					spec.TTL = ttl
					var expires time.Time
					h.runUntil(2*ttl, st, spec, h.work("a", func(ctx context.Context) {
						hs, err := mem.Holders(ctx)
						if err != nil || len(hs) != 1 {
							t.Errorf("Holders = %+v, %v; want a's lease", hs, err)
							return
						}
						expires = hs[0].Expires
						<-ctx.Done()
					}))
					terms := h.Terms("a")
					if len(terms) != 1 {
						t.Fatalf("got terms %+v, want one", terms)
					}
					if margin := expires.Sub(terms[0].Cancelled); margin != ttl/6 {
						t.Errorf("got the step-down %v before the store's expiry %v, want TTL/6 = %v: the margin holds", margin, h.since(expires), ttl/6)
					}
				})
			})
		}
	}
}

// TestCancelWhileALandedAcquireIsInFlightLeavesTheLeaseFree pins that a
// shutdown during an Acquire whose write landed but whose answer is still
// on its way frees the lease: the cut attempt is released.
func TestCancelWhileALandedAcquireIsInFlightLeavesTheLeaseFree(t *testing.T) {
	for _, c := range []struct {
		name string
		st   func(*lease.MemoryStore, func(storeCall) fault) lease.Store
	}{
		{"Release", func(m *lease.MemoryStore, p func(storeCall) fault) lease.Store { return newFaultStore(m, p) }},
		{"ReleaseTerm", func(m *lease.MemoryStore, p func(storeCall) fault) lease.Store { return newTermFaultStore(m, p) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				mem := lease.NewMemoryStore()
				st := c.st(mem, func(c storeCall) fault {
					if c.Op == "acquire" {
						return fault{kind: landSlow, delay: 900 * time.Millisecond}
					}
					return fault{}
				})
				h.runUntil(300*time.Millisecond, st, h.spec("a", time.Hour), h.work("a", nil))
				if hs, err := mem.Holders(t.Context()); err != nil || len(hs) != 0 {
					t.Errorf("Holders = %+v, %v after Run returned; want none: the landed write of the cut attempt is released", hs, err)
				}
				if terms := h.Terms("a"); len(terms) != 0 {
					t.Errorf("got terms %+v, want none: the attempt's answer never arrived", terms)
				}
			})
		})
	}
}

// TestSlowGrantDoesNotExtendTheDeadline pins that the deadline runs from a
// call's send, not its answer: a granted Acquire or renewal answered 800ms
// late moves the deadline to its send's expiry − TTL/6, not later.
func TestSlowGrantDoesNotExtendTheDeadline(t *testing.T) {
	for _, c := range []struct {
		name string
		slow func(storeCall) bool
		at   time.Duration // the step-down: the slow call's send + 2.5s
	}{
		{"acquire", func(c storeCall) bool { return c.Op == "acquire" }, 2500 * time.Millisecond},
		{"renewal", func(c storeCall) bool { return c.Op == "renew" && c.N == 0 }, 3500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := newTermFaultStore(lease.NewMemoryStore(), func(sc storeCall) fault {
					switch {
					case c.slow(sc):
						return fault{kind: landSlow, delay: 800 * time.Millisecond}
					case sc.Op == "renew":
						return fault{kind: fail}
					}
					return fault{}
				})
				h.runUntil(6*time.Second, st, h.spec("a", time.Hour), h.work("a", nil))
				terms := h.Terms("a")
				if len(terms) != 1 || terms[0].Cancelled != h.at(c.at) {
					t.Errorf("got terms %+v, want one stepping down at %v: a slow answer does not extend the deadline, computed from the send", terms, c.at)
				}
			})
		})
	}
}

// TestFiveHealthyCandidatesKeepOneUninterruptedTerm pins stickiness under
// competition: five candidates on one healthy store elect one holder, whose
// term runs uninterrupted across ten TTLs; the others never win.
func TestFiveHealthyCandidatesKeepOneUninterruptedTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newTermFaultStore(lease.NewMemoryStore(), nil)
		ctx, cancel := context.WithCancel(t.Context())
		var dones []<-chan error
		for i, o := range []string{"a", "b", "c", "d", "e"} {
			time.Sleep(time.Duration(i) * 37 * time.Millisecond)
			dones = append(dones, h.start(ctx, st, h.spec(o, 200*time.Millisecond), h.work(o, nil)))
		}
		h.sleepUntil(10 * ttl)
		terms := h.Terms("")
		cancel()
		for _, d := range dones {
			<-d
		}
		if len(terms) != 1 || terms[0].Owner != "a" || !terms[0].Cancelled.IsZero() {
			t.Fatalf("got terms %+v at 10 TTLs, want one, a's, still running: five healthy candidates keep one uninterrupted term", terms)
		}
		if ev := h.Events("", lease.Elected); len(ev) != 1 {
			t.Errorf("got %d elections, want 1", len(ev))
		}
		if sd := h.Events("", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != lease.ReasonCanceled {
			t.Errorf("got step-downs %+v, want one, at shutdown", sd)
		}
	})
}

// TestWinHandledPastItsDeadlineStartsNoWork pins that a winning Acquire
// that Run gets to only after its step-down deadline (its send's expiry −
// TTL/6) starts no work: the term steps down at once for the deadline and
// releases, as a renewal answered after the deadline proves nothing. Sent
// at 0 with TTL 3s, the win is handled at 3s, past the 2.5s deadline and
// at the store's expiry, when a successor may already hold the lease.
func TestWinHandledPastItsDeadlineStartsNoWork(t *testing.T) {
	for _, c := range []struct {
		name string
		slow map[string]bool // log records the sink takes 3s over
		plan func(storeCall) fault
	}{
		{"store answering after its cut", nil, func(c storeCall) fault {
			if c.Op == "acquire" {
				return fault{kind: deaf, delay: 3 * time.Second}
			}
			return fault{}
		}},
		{"slow log sink at the election", map[string]bool{"lease: elected": true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				mem := lease.NewMemoryStore()
				st := newTermFaultStore(mem, c.plan)
				spec := h.spec("a", time.Hour)
				if c.slow != nil {
					spec.Logger = slog.New(&slowSink{slow: c.slow, delay: 3 * time.Second, cancelled: map[string]bool{}})
				}
				h.runUntil(6*time.Second, st, spec, h.work("a", nil))
				if terms := h.Terms("a"); len(terms) != 0 {
					t.Errorf("got terms %+v, want none: a win handled past its deadline starts no work", terms)
				}
				if sd := h.Events("a", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != lease.ReasonDeadline || sd[0].At != h.at(3*time.Second) {
					t.Errorf("got step-downs %+v, want one for %q at 3s: the term is over before it starts", sd, lease.ReasonDeadline)
				}
				if rel := h.Events("a", lease.Released); len(rel) != 1 || rel[0].Reason != lease.ReasonDeadline {
					t.Errorf("got releases %+v, want one for %q", rel, lease.ReasonDeadline)
				}
				if hs, err := mem.Holders(t.Context()); err != nil || len(hs) != 0 {
					t.Errorf("Holders = %+v, %v after the step-down; want none: the late win is released", hs, err)
				}
			})
		})
	}
}

// TestSteppedDownReportsHowLongBeforeTheStoreExpiry pins what an operator
// reads at a step-down: the SteppedDown event's Margin and the "stepped
// down" line's before_expiry are how long before the store's expiry of the
// term's last proven call work's context was cancelled, and the line is an
// error when that is zero or less (a successor may have overlapped).
func TestSteppedDownReportsHowLongBeforeTheStoreExpiry(t *testing.T) {
	for _, c := range []struct {
		name   string
		plan   func(storeCall) fault
		until  time.Duration // Run's ctx is cancelled
		reason string
		margin time.Duration
		level  string
		why    string
	}{
		{"deadline", func(c storeCall) fault {
			if c.Op == "renew" {
				return fault{kind: fail}
			}
			return fault{}
		}, 6 * time.Second, lease.ReasonDeadline, ttl / 6, "WARN", "renewals fail: the step-down at 2.5s is TTL/6 before the winning send's expiry at 3s"},
		{"shutdown", nil, 1200 * time.Millisecond, lease.ReasonCanceled, 2800 * time.Millisecond, "INFO",
			"the renewal sent at 1s was granted: expiry 4s, shutdown at 1.2s"},
		{"won past the expiry", func(c storeCall) fault {
			if c.Op == "acquire" {
				return fault{kind: deaf, delay: 3500 * time.Millisecond}
			}
			return fault{}
		}, 6 * time.Second, lease.ReasonDeadline, -500 * time.Millisecond, "ERROR",
			"the win sent at 0 is handled at 3.5s, half a second after its expiry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := newTermFaultStore(lease.NewMemoryStore(), c.plan)
				h.runUntil(c.until, st, h.spec("a", time.Hour), h.work("a", nil))
				sd := h.Events("a", lease.SteppedDown)
				if len(sd) != 1 || sd[0].Reason != c.reason || sd[0].Margin != c.margin {
					t.Errorf("got step-downs %+v, want one for %q with Margin %v: %s", sd, c.reason, c.margin, c.why)
				}
				lines := h.Logs("lease: stepped down")
				if len(lines) != 1 {
					t.Fatalf("got %d \"stepped down\" lines, want 1", len(lines))
				}
				// slog's JSON handler writes a duration in nanoseconds.
				if got, _ := lines[0]["before_expiry"].(float64); time.Duration(got) != c.margin || lines[0]["level"] != c.level {
					t.Errorf("got the line %v, want before_expiry %v at level %s: %s", lines[0], c.margin, c.level, c.why)
				}
			})
		})
	}
}

// TestNoRenewalOnceWorkIsCancelled pins that a term whose work's context
// was cancelled sends no renewal: the term is over, and a renewal would
// only extend the lease it is about to release. Two paths reach a tick
// after that: Run's goroutine held up in a slow log sink past the deadline
// (renewals fail; "renew failed" at 1s takes 3s, the deadline is 2.5s,
// and the 2s tick waits), and a win handled past its deadline (its first
// tick is overdue). Which ready event Run's goroutine takes first is
// random, so each path runs 20 times.
func TestNoRenewalOnceWorkIsCancelled(t *testing.T) {
	for _, c := range []struct {
		name     string
		slow     map[string]bool
		plan     func(storeCall) fault
		stepDown time.Duration
	}{
		{"goroutine held up past the deadline", map[string]bool{"lease: renew failed": true}, func(c storeCall) fault {
			if c.Op == "renew" {
				return fault{kind: fail}
			}
			return fault{}
		}, 2500 * time.Millisecond},
		{"win handled past its deadline", nil, func(c storeCall) fault {
			if c.Op == "acquire" {
				return fault{kind: deaf, delay: 3 * time.Second}
			}
			return fault{}
		}, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			for range 20 {
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					st := newTermFaultStore(lease.NewMemoryStore(), c.plan)
					spec := h.spec("a", time.Hour)
					spec.Logger = slog.New(&slowSink{slow: c.slow, delay: 3 * time.Second, cancelled: map[string]bool{}})
					h.runUntil(6*time.Second, st, spec, h.work("a", nil))
					for _, rn := range st.Calls("renew", "a") {
						if !rn.At.Before(h.at(c.stepDown)) {
							t.Errorf("got a renewal at %v, after the step-down at %v: a term whose work's context is cancelled renews nothing", h.since(rn.At), c.stepDown)
						}
					}
				})
			}
		})
	}
}
