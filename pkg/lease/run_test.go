package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

func TestRunRejectsAnUnusableSpecNamingTheField(t *testing.T) {
	good := lease.Spec{Name: "net", Owner: "a", TTL: ttl, Retry: time.Second}
	work := func(context.Context) {}
	cases := []struct {
		name  string
		why   string
		st    lease.Store
		spec  func(lease.Spec) lease.Spec
		work  func(context.Context)
		field string
	}{
		{"empty name", "a lease needs a name", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.Name = ""; return s }, work, `Spec.Name ""`},
		{"blank name", "a blank name is empty", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.Name = " \t"; return s }, work, `Spec.Name " \t"`},
		{"empty owner", "a candidate needs an owner", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.Owner = ""; return s }, work, `Spec.Owner ""`},
		{"blank owner", "a blank owner is empty", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.Owner = "  "; return s }, work, `Spec.Owner "  "`},
		{"zero TTL", "the stores keep milliseconds", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.TTL = 0; return s }, work, "Spec.TTL 0s"},
		{"sub-ms TTL", "the stores keep milliseconds", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.TTL = 999 * time.Microsecond; return s }, work, "Spec.TTL 999µs"},
		{"negative Retry", "a campaign cannot go back in time", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { s.Retry = -time.Second; return s }, work, "Spec.Retry -1s"},
		{"nil store", "there is nothing to campaign on", nil, func(s lease.Spec) lease.Spec { return s }, work, "store is nil"},
		{"nil work", "there is nothing to run", lease.NewMemoryStore(), func(s lease.Spec) lease.Spec { return s }, nil, "work is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A done ctx: Run with a spec it failed to reject returns nil at
			// once rather than campaigning until the test times out.
			done, cancel := context.WithCancel(t.Context())
			cancel()
			err := lease.Run(done, c.st, c.spec(good), c.work)
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("got %v, want an error wrapping ErrInvalid: %s", err, c.why)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("got %q, want it to name %s: bad input names the field and value", err, c.field)
			}
		})
	}
}

func TestRunValidatesBeforeAnyStoreCall(t *testing.T) {
	st := newFaultStore(lease.NewMemoryStore(), nil)
	err := lease.Run(context.Background(), st, lease.Spec{Name: "net", Owner: "a"}, func(context.Context) {})
	if !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid for a zero TTL", err)
	}
	if n := len(st.Calls("", "")); n != 0 {
		t.Errorf("got %d store calls, want 0: validation happens before the campaign", n)
	}
}

// holdByOther makes "other" hold the lease for an hour from now.
func holdByOther(t *testing.T, st lease.Store) {
	ok, err := st.Acquire(context.Background(), leaseKey, "other", time.Now(), time.Hour)
	if !ok || err != nil {
		t.Fatalf("setup: other's Acquire = %v, %v", ok, err)
	}
}

func TestCampaignSendsOneAttemptEveryRetryWithItsSendInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		holdByOther(t, mem)
		st := newFaultStore(mem, nil)
		h.runUntil(9*time.Second, st, h.spec("a", 2*time.Second), h.work("a", nil))
		calls := st.Calls("acquire", "a")
		got := h.callTimes(calls)
		want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second}
		if !slices.Equal(got, want) {
			t.Fatalf("got attempts at %v, want %v: one attempt every Retry", got, want)
		}
		for _, c := range calls {
			if !c.Now.Equal(c.At) {
				t.Errorf("attempt at %v passed now %v, want its send instant", h.since(c.At), h.since(c.Now))
			}
			if c.Deadline != ttl/3 {
				t.Errorf("attempt at %v bounded by %v, want TTL/3 = %v, never Retry", h.since(c.At), c.Deadline, ttl/3)
			}
		}
		if n := len(h.Terms("")); n != 0 {
			t.Errorf("got %d terms, want 0: the lease is another's", n)
		}
	})
}

// A store orders one owner's terms by the millisecond expiry they ask for
// (lease.TermStore), so Run never sends two attempts in one millisecond,
// whatever its Retry.
func TestCampaignSendsEachAttemptInALaterMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		holdByOther(t, mem)
		st := newFaultStore(mem, nil)
		h.runUntil(3500*time.Microsecond, st, h.spec("a", 100*time.Microsecond), h.work("a", nil))
		got := h.callTimes(st.Calls("acquire", "a"))
		want := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
		if !slices.Equal(got, want) {
			t.Fatalf("got attempts at %v with Retry 100µs, want %v: each in a later millisecond than the last", got, want)
		}
	})
}

func TestRetryZeroMeansTTLOverThree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		holdByOther(t, mem)
		st := newFaultStore(mem, nil)
		h.runUntil(3500*time.Millisecond, st, h.spec("a", 0), h.work("a", nil))
		got := h.callTimes(st.Calls("acquire", "a"))
		want := []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(got, want) {
			t.Errorf("got attempts at %v, want %v: Retry 0 means TTL/3", got, want)
		}
	})
}

func TestCampaignAttemptIsCutAtTTLOverThreeNeverByRetry(t *testing.T) {
	for _, retry := range []time.Duration{200 * time.Millisecond, 5 * time.Second} {
		t.Run("retry "+retry.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
					if c.Op == "acquire" {
						return fault{delay: time.Hour} // the store never answers
					}
					return fault{}
				})
				h.runUntil(5500*time.Millisecond, st, h.spec("a", retry), h.work("a", nil))
				calls := st.Calls("acquire", "a")
				if len(calls) == 0 {
					t.Fatal("got no attempt, want one at 0")
				}
				if got := calls[0].End.Sub(calls[0].At); got != ttl/3 {
					t.Errorf("got the attempt cut after %v, want TTL/3 = %v, never Retry %v", got, ttl/3, retry)
				}
				// The next attempt waits for the cut one (and its release), and
				// otherwise goes out Retry after the previous one was sent.
				wantNext := max(retry, ttl/3)
				if len(calls) < 2 || h.since(calls[1].At) != wantNext {
					t.Errorf("got attempts at %v, want the second at %v", h.callTimes(calls), wantNext)
				}
				if n := len(h.Terms("")); n != 0 {
					t.Errorf("got %d terms, want 0: a store that cannot answer elects nobody", n)
				}
			})
		})
	}
}

func TestUnansweredAcquireIsFollowedByARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		st := newFaultStore(mem, func(c storeCall) fault {
			if c.Op == "acquire" && c.Owner == "a" && c.N == 0 {
				return fault{kind: landLose} // the write lands, the answer is lost
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		doneA := h.start(ctx, st, h.spec("a", time.Second), h.work("a", nil))
		time.Sleep(100 * time.Millisecond)
		doneB := h.start(ctx, st, h.spec("b", time.Second), h.work("b", nil))
		h.sleepUntil(2 * time.Second)
		cancel()
		<-doneA
		<-doneB

		rel := st.Calls("release", "a")
		if len(rel) == 0 || h.since(rel[0].At) != 0 || rel[0].Err != nil {
			t.Fatalf("got a's releases at %v, want one at 0 answered nil: an unanswered Acquire is followed by a Release", h.callTimes(rel))
		}
		if rel[0].CtxErr != nil || rel[0].Deadline != ttl/3 {
			t.Errorf("got the release on a ctx with error %v bounded by %v, want a live ctx bounded by TTL/3", rel[0].CtxErr, rel[0].Deadline)
		}
		termsB := h.Terms("b")
		if len(termsB) != 1 || h.since(termsB[0].Start) != 100*time.Millisecond {
			t.Errorf("got b's terms %+v, want one starting at its first attempt, 100ms: the landed write must not keep a successor waiting a TTL", termsB)
		}
		if n := len(h.Terms("a")); n != 0 {
			t.Errorf("got %d terms of a, want 0: an unanswered attempt does not start work", n)
		}
	})
}

// TestReleaseAfterAnUnansweredAttemptIsNoWarning pins that a follower whose
// Acquire failed while another owner holds the lease does not warn that its
// follow-up Release was refused: ErrLost is the expected answer there, and a
// warning on every attempt would bury the real ones.
func TestReleaseAfterAnUnansweredAttemptIsNoWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		if ok, err := mem.Acquire(t.Context(), "net", "holder", time.Now(), time.Hour); !ok || err != nil {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
		st := newFaultStore(mem, func(c storeCall) fault {
			if c.Op == "acquire" {
				return fault{kind: fail}
			}
			return fault{}
		})
		h.runUntil(3*time.Second, st, h.spec("a", time.Second), h.work("a", nil))
		if rel := st.Calls("release", "a"); len(rel) < 2 || !errors.Is(rel[0].Err, lease.ErrLost) {
			t.Fatalf("got a's releases %v, want several, each refused with ErrLost: the setup", h.callTimes(rel))
		}
		if got := h.Logs("lease: release refused: the lease moved on"); len(got) != 0 {
			t.Errorf("got %d 'release refused' warnings, want 0: after an unanswered attempt ErrLost is the expected answer", len(got))
		}
		if got := h.Logs("lease: store unreachable"); len(got) != 1 {
			t.Errorf("got %d 'store unreachable' lines, want 1: the failing Acquires are one episode", len(got))
		}
	})
}

func TestAcquireLandingAfterItsReleaseKeepsTheLeaseOneTTL(t *testing.T) {
	// The residual case of docs/design.md, decision 2: the write lands after the
	// release that followed it; the lease stays a's, unrenewed, one TTL from
	// the attempt's send, the bound of a crash.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "acquire" && c.Owner == "a" && c.N == 0 {
				return fault{kind: late, delay: 1500 * time.Millisecond}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		doneA := h.start(ctx, st, h.spec("a", time.Hour), h.work("a", nil))
		h.sleepUntil(1600 * time.Millisecond) // the write landed at 1.5s
		doneB := h.start(ctx, st, h.spec("b", time.Second), h.work("b", nil))
		h.sleepUntil(5 * time.Second)
		cancel()
		<-doneA
		<-doneB
		st.Settle()
		if got := h.callTimes(st.Calls("release", "a")); !slices.Equal(got, []time.Duration{ttl / 3}) {
			t.Errorf("got a's releases at %v, want one at the cut, %v", got, ttl/3)
		}
		// b's attempts at 1.6s and 2.6s find a's lease (expiry 3s); 3.6s wins.
		termsB := h.Terms("b")
		if len(termsB) != 1 || termsB[0].Start != h.at(3600*time.Millisecond) {
			t.Fatalf("got b's terms %+v, want one from 3.6s, b's first attempt after the landed write's expiry, one TTL from its send", termsB)
		}
		if len(h.Terms("a")) != 0 {
			t.Errorf("got a's terms %+v, want none", h.Terms("a"))
		}
	})
}

// answersPastCtx is a Store whose Acquire lands and answers even when the
// caller's ctx is done meanwhile: the answer was on its way.
type answersPastCtx struct {
	lease.Store
	onAcquire func() // called as the Acquire is sent
}

func (s answersPastCtx) Acquire(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (bool, error) {
	s.onAcquire()
	return s.Store.Acquire(context.WithoutCancel(ctx), name, owner, now, ttl)
}

func TestAcquireWonAfterCtxIsDoneStartsNoTermAndIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		mem := lease.NewMemoryStore()
		ctx, cancel := context.WithCancel(t.Context())
		st := newFaultStore(answersPastCtx{Store: mem, onAcquire: cancel}, nil)
		if err := <-h.start(ctx, st, h.spec("a", time.Hour), h.work("a", nil)); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if acq := st.Calls("acquire", "a"); len(acq) != 1 || !acq[0].OK {
			t.Fatalf("got attempts %+v, want one won: the test needs a won Acquire answered after ctx is done", acq)
		}
		if ev := h.Events("a", lease.Elected); len(ev) != 0 {
			t.Errorf("got Elected events %+v, want none: a term won after ctx is done does not start", ev)
		}
		if terms := h.Terms("a"); len(terms) != 0 {
			t.Errorf("got terms %+v, want none: work does not start once ctx is done", terms)
		}
		if rel := st.Calls("release", "a"); len(rel) != 1 || rel[0].Err != nil || rel[0].CtxErr != nil {
			t.Errorf("got releases %+v, want one on a live ctx, answered nil: the won lease is handed back", rel)
		}
		if hs, err := mem.Holders(t.Context()); err != nil || len(hs) != 0 {
			t.Errorf("Holders = %+v, %v; want none: the won lease is released", hs, err)
		}
		if rl := h.Events("a", lease.Released); len(rl) != 1 || rl[0].Reason != lease.ReasonCanceled {
			t.Errorf("got Released events %+v, want one with reason %q", rl, lease.ReasonCanceled)
		}
	})
}

func TestStoreThatCannotAnswerElectsNobody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(storeCall) fault { return fault{kind: fail} })
		h.runUntil(10*ttl-500*time.Millisecond, st, h.spec("a", time.Second), h.work("a", nil))
		if n := len(st.Calls("acquire", "a")); n != 30 {
			t.Errorf("got %d attempts in 30s, want 30: the campaign goes on", n)
		}
		if terms := h.Terms(""); len(terms) != 0 {
			t.Errorf("got terms %+v, want none: a store that cannot answer elects nobody", terms)
		}
		if ev := h.Events("", lease.Elected); len(ev) != 0 {
			t.Errorf("got Elected events %+v, want none", ev)
		}
	})
}

func TestRenewalsGoOutEveryTTLOverThreeFromTheWinningSend(t *testing.T) {
	// The cadence runs from the winning Acquire's send, not its answer: a
	// win answered 400ms late renews at the same instants as a prompt one.
	for _, answer := range []time.Duration{0, 400 * time.Millisecond} {
		t.Run("acquire answered after "+answer.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				time.Sleep(700 * time.Microsecond)
				st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
					if c.Op == "acquire" && answer > 0 {
						return fault{kind: landSlow, delay: answer}
					}
					return fault{}
				})
				h.runUntil(5500*time.Millisecond, st, h.spec("a", time.Second), h.work("a", nil))
				sent := h.at(700 * time.Microsecond)
				var want []time.Duration
				for k := 1; k <= 5; k++ {
					want = append(want, h.since(sent.Add(time.Duration(k)*ttl/3)))
				}
				calls := st.Calls("renew", "a")
				if got := h.callTimes(calls); !slices.Equal(got, want) {
					t.Fatalf("got renewals at %v, want %v: renew every TTL/3 from the winning Acquire's send", got, want)
				}
				for _, c := range calls {
					if !c.Now.Equal(c.At) || c.Deadline != ttl/3 {
						t.Errorf("renewal at %v: now %v, bound %v; want its send instant and TTL/3", h.since(c.At), h.since(c.Now), c.Deadline)
					}
				}
			})
		})
	}
}

// TestRenewalsKeepTheirCadenceWhenRunsGoroutineIsHeldUp pins that the
// renewals stay on the grid of TTL/3 from the winning send when Run's
// goroutine handles a tick late: the sink takes 1.2s over the "renew
// failed" record of the renewal at 1s, so the tick of 2s goes out at 2.2s,
// and the next ones at 3s and 4s, not 3.2s and 4.2s, which would leave
// each renewal less time before the deadline.
func TestRenewalsKeepTheirCadenceWhenRunsGoroutineIsHeldUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.N == 0 {
				return fault{kind: fail}
			}
			return fault{}
		})
		spec := h.spec("a", time.Hour)
		spec.Logger = slog.New(&slowSink{slow: map[string]bool{"lease: renew failed": true}, delay: 1200 * time.Millisecond, cancelled: map[string]bool{}})
		h.runUntil(4500*time.Millisecond, st, spec, h.work("a", nil))
		want := []time.Duration{time.Second, 2200 * time.Millisecond, 3 * time.Second, 4 * time.Second}
		if got := h.callTimes(st.Calls("renew", "a")); !slices.Equal(got, want) {
			t.Errorf("got renewals at %v, want %v: a tick handled late does not shift the ones after it", got, want)
		}
	})
}

// TestAttemptAfterATermGoesOutInALaterMillisecondThanItsLastRenewal pins
// Spec.Retry's floor after a term: with Retry 100µs, work returns at
// 1.0002s, just after the renewal sent at 1s; the next attempt goes out at
// 1.001s, in a later millisecond than that renewal, not at 1.0003s (a
// store then could not tell the new term from the old, see TermStore).
func TestAttemptAfterATermGoesOutInALaterMillisecondThanItsLastRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), nil)
		first := true
		h.runUntil(1500*time.Millisecond, st, h.spec("a", 100*time.Microsecond), h.work("a", func(ctx context.Context) {
			if first {
				first = false
				time.Sleep(time.Second + 200*time.Microsecond)
				return
			}
			<-ctx.Done()
		}))
		if got := h.callTimes(st.Calls("renew", "a")); !slices.Equal(got, []time.Duration{time.Second}) {
			t.Fatalf("setup: got renewals at %v, want one at 1s", got)
		}
		want := []time.Duration{0, 1001 * time.Millisecond}
		if got := h.callTimes(st.Calls("acquire", "a")); !slices.Equal(got, want) {
			t.Errorf("got attempts at %v, want %v: the attempt after a term goes out in a later millisecond than the term's last renewal", got, want)
		}
	})
}

func TestStepDownComesAtTheTruncatedDeadlineNeverLater(t *testing.T) {
	// The winning Acquire is sent at 0.7ms: the store's expiry is
	// trunc(0.7ms)+3s = 3s, so the deadline is 3s − 500ms = 2.5s, 0.7ms
	// before sent + TTL − TTL/6.
	for _, f := range []struct {
		name string
		flt  fault
	}{
		{"renewals fail", fault{kind: fail}},
		{"renewals hang", fault{delay: time.Hour}},
	} {
		t.Run(f.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				time.Sleep(700 * time.Microsecond)
				mem := lease.NewMemoryStore()
				st := newFaultStore(mem, func(c storeCall) fault {
					if c.Op == "renew" {
						return f.flt
					}
					return fault{}
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := h.start(ctx, st, h.spec("a", time.Hour), h.work("a", nil))
				h.sleepUntil(2 * time.Second)
				hs, err := mem.Holders(t.Context())
				if err != nil || len(hs) != 1 {
					t.Fatalf("Holders = %v, %v; want a's lease", hs, err)
				}
				h.sleepUntil(4 * time.Second)
				cancel()
				<-done

				terms := h.Terms("a")
				if len(terms) != 1 {
					t.Fatalf("got terms %+v, want one", terms)
				}
				want := h.at(2500 * time.Millisecond)
				if terms[0].Cancelled != want {
					t.Errorf("got the step-down at %v, want %v = trunc(sent)+TTL−TTL/6: a failed or unanswered renewal keeps the term, the deadline runs", h.since(terms[0].Cancelled), h.since(want))
				}
				if margin := hs[0].Expires.Sub(terms[0].Cancelled); margin != ttl/6 {
					t.Errorf("got the step-down %v before the store's expiry, want TTL/6 = %v", margin, ttl/6)
				}
				sd := h.Events("a", lease.SteppedDown)
				if len(sd) != 1 || sd[0].Reason != lease.ReasonDeadline {
					t.Errorf("got step-downs %+v, want one with reason %q", sd, lease.ReasonDeadline)
				}
				if f.flt.delay > 0 {
					renews := st.Calls("renew", "a")
					if len(renews) != 2 || renews[0].End.Sub(renews[0].At) != ttl/3 {
						t.Errorf("got renewals %v, want two, the first cut after TTL/3", h.callTimes(renews))
					}
				}
			})
		})
	}
}

func TestSuccessfulRenewalMovesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		time.Sleep(700 * time.Microsecond)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.N != 1 {
				return fault{kind: fail}
			}
			return fault{}
		})
		h.runUntil(6*time.Second, st, h.spec("a", time.Hour), h.work("a", nil))
		// Renewal 1 (at 2.0007s) succeeds: expiry trunc(2.0007s)+3s = 5s,
		// deadline 4.5s.
		terms := h.Terms("a")
		if len(terms) != 1 || terms[0].Cancelled != h.at(4500*time.Millisecond) {
			t.Errorf("got terms %+v, want one stepping down at 4.5s: a successful renewal moves the deadline", terms)
		}
	})
}

func TestRefusedRenewalStepsDownAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.N == 2 {
				return fault{kind: refuse}
			}
			return fault{}
		})
		h.runUntil(5*time.Second, st, h.spec("a", time.Hour), h.work("a", nil))
		terms := h.Terms("a")
		if len(terms) != 1 || terms[0].Cancelled != h.at(3*time.Second) {
			t.Fatalf("got terms %+v, want one stepping down at 3s, the refused renewal", terms)
		}
		sd := h.Events("a", lease.SteppedDown)
		if len(sd) != 1 || sd[0].Reason != lease.ReasonRefused {
			t.Errorf("got step-downs %+v, want one with reason %q", sd, lease.ReasonRefused)
		}
		if got := h.callTimes(st.Calls("release", "a")); !slices.Equal(got, []time.Duration{3 * time.Second}) {
			t.Errorf("got releases at %v, want one at 3s", got)
		}
	})
}

// TestSteppedDownIsReportedAtTheRefusalWhileWorkIgnoresItsContext pins
// Spec.OnEvent's promise that SteppedDown comes right after work's context
// is cancelled: a refused renewal at 1s reports the step-down at 1s, even
// while work ignores its cancellation until 4s, not at the deadline (2.5s)
// or when work returns.
func TestSteppedDownIsReportedAtTheRefusalWhileWorkIgnoresItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.N == 0 {
				return fault{kind: refuse}
			}
			return fault{}
		})
		h.runUntil(5*time.Second, st, h.spec("a", time.Hour), h.work("a", func(context.Context) {
			time.Sleep(4 * time.Second) // work that ignores its context
		}))
		sd := h.Events("a", lease.SteppedDown)
		if len(sd) != 1 || sd[0].Reason != lease.ReasonRefused || sd[0].At != h.at(time.Second) {
			t.Fatalf("got step-downs %+v, want one for %q at 1s: SteppedDown comes right after work's context is cancelled", sd, lease.ReasonRefused)
		}
		if got := h.callTimes(st.Calls("release", "a")); !slices.Equal(got, []time.Duration{4 * time.Second}) {
			t.Errorf("got releases at %v, want one at 4s, once work returned", got)
		}
	})
}

func TestReleaseAfterTheTermIsOnAContextDetachedFromCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), nil)
		h.runUntil(5*time.Second, st, h.spec("a", time.Hour), h.work("a", func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(time.Second) // work winds down
		}))
		if back := time.Since(h.t0); back != 6*time.Second {
			t.Errorf("Run returned at %v, want 6s: after work returned and the lease was released", back)
		}
		rel := st.Calls("release", "a")
		if len(rel) != 1 {
			t.Fatalf("got releases %v, want one", h.callTimes(rel))
		}
		if rel[0].At != h.at(6*time.Second) || rel[0].CtxErr != nil || rel[0].Deadline != ttl/3 || rel[0].Err != nil {
			t.Errorf("got release at %v on ctx error %v bounded by %v answered %v, want at 6s (work returned), a live ctx bounded by TTL/3, answered nil",
				h.since(rel[0].At), rel[0].CtxErr, rel[0].Deadline, rel[0].Err)
		}
		sd := h.Events("a", lease.SteppedDown)
		if len(sd) != 1 || sd[0].Reason != lease.ReasonCanceled || sd[0].At != h.at(5*time.Second) {
			t.Errorf("got step-downs %+v, want one at 5s with reason %q", sd, lease.ReasonCanceled)
		}
		if rl := h.Events("a", lease.Released); len(rl) != 1 || rl[0].At != h.at(6*time.Second) {
			t.Errorf("got Released events %+v, want one at 6s", rl)
		}
	})
}

func TestCleanStopHandsOverWithinOneRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retry = 2 * time.Second
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), nil)
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		doneA := h.start(ctx, st, h.spec("a", retry), h.work("a", func(ctx context.Context) {
			calls++
			if calls == 1 {
				time.Sleep(10 * time.Second) // the net finishes its term early
				return
			}
			<-ctx.Done()
		}))
		time.Sleep(500 * time.Millisecond)
		doneB := h.start(ctx, st, h.spec("b", retry), h.work("b", nil))
		h.sleepUntil(15 * time.Second)
		cancel()
		<-doneA
		<-doneB

		a, b := h.Terms("a"), h.Terms("b")
		if len(a) != 1 || a[0].Returned != h.at(10*time.Second) {
			t.Fatalf("got a's terms %+v, want one returning at 10s", a)
		}
		if got := h.callTimes(st.Calls("release", "a")); !slices.Equal(got, []time.Duration{10 * time.Second}) {
			t.Errorf("got a's releases at %v, want one at 10s, when work returned", got)
		}
		if len(b) != 1 || b[0].Start != h.at(10500*time.Millisecond) {
			t.Fatalf("got b's terms %+v, want one from b's next attempt, 10.5s", b)
		}
		if gap := b[0].Start.Sub(a[0].Returned); gap > retry {
			t.Errorf("got a hand-over after %v, want at most Retry %v", gap, retry)
		}
		// Work returning ends a's term; a campaigns again Retry later.
		if got := h.callTimes(st.Calls("acquire", "a")); !slices.Contains(got, 12*time.Second) {
			t.Errorf("got a's attempts at %v, want one at 12s, Retry after its term ended", got)
		}
	})
}

func TestCrashHandsOverWithinTTLPlusRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const retry = time.Second
		crash := 4200 * time.Millisecond
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Owner == "a" && !c.At.Before(h.at(crash)) {
				return fault{kind: fail} // a is gone: nothing of it reaches the store, no release
			}
			return fault{}
		})
		ctxA, crashA := context.WithCancel(t.Context())
		ctx, cancel := context.WithCancel(t.Context())
		doneA := h.start(ctxA, st, h.spec("a", retry), h.work("a", nil))
		time.Sleep(500 * time.Millisecond)
		doneB := h.start(ctx, st, h.spec("b", retry), h.work("b", nil))
		h.sleepUntil(crash)
		crashA()
		<-doneA
		h.sleepUntil(10 * time.Second)
		cancel()
		<-doneB

		// a's last landed renewal was sent at 4s: expiry 7s. b's attempts go
		// out at 0.5s + k·1s, so the first at or after 7s is 7.5s.
		b := h.Terms("b")
		if len(b) != 1 || b[0].Start != h.at(7500*time.Millisecond) {
			t.Fatalf("got b's terms %+v, want one from 7.5s", b)
		}
		if bound := h.at(crash + ttl + retry); b[0].Start.After(bound) {
			t.Errorf("got the takeover at %v, want at most crash + TTL + Retry = %v", h.since(b[0].Start), h.since(bound))
		}
	})
}

func TestPanicInWorkIsReleasedThenRepanicked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		st := newFaultStore(lease.NewMemoryStore(), nil)
		recovered := make(chan any, 1)
		go func() {
			defer func() { recovered <- recover() }()
			_ = lease.Run(t.Context(), st, h.spec("a", time.Hour), func(context.Context) {
				time.Sleep(2 * time.Second)
				panic("work broke")
			})
		}()
		p := <-recovered
		if p != "work broke" {
			t.Fatalf("got Run panicking with %v, want work's panic value re-panicked", p)
		}
		if got := h.callTimes(st.Calls("release", "a")); !slices.Equal(got, []time.Duration{2 * time.Second}) {
			t.Errorf("got releases at %v, want one at 2s, before the re-panic", got)
		}
		if sd := h.Events("a", lease.SteppedDown); len(sd) != 1 || sd[0].Reason != lease.ReasonWorkPanicked {
			t.Errorf("got step-downs %+v, want one with reason %q", sd, lease.ReasonWorkPanicked)
		}
		if len(h.Logs("lease: work panicked")) != 1 {
			t.Errorf("want one log of the panic with its stack")
		}
	})
}

func TestTermReleaseNotAnsweredWithSuccessIsLoggedNotASuccess(t *testing.T) {
	for _, c := range []struct {
		name string
		kind faultKind
		log  string // the one WARN log the release gets
	}{
		{"refused with ErrLost", refuse, "lease: release refused: the lease moved on"},
		{"that got no answer", fail, "lease: release failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				st := newFaultStore(lease.NewMemoryStore(), func(sc storeCall) fault {
					if sc.Op == "release" {
						return fault{kind: c.kind}
					}
					return fault{}
				})
				h.runUntil(2*time.Second, st, h.spec("a", time.Hour), h.work("a", nil))
				if rl := h.Events("a", lease.Released); len(rl) != 0 {
					t.Errorf("got Released events %+v, want none: a release %s is not a success", rl, c.name)
				}
				if n := len(h.Logs("lease: released")); n != 0 {
					t.Errorf("got %d 'released' logs, want 0: a release %s is not a success", n, c.name)
				}
				logs := h.Logs(c.log)
				if len(logs) != 1 || logs[0]["level"] != "WARN" || logs[0]["reason"] != lease.ReasonCanceled {
					t.Errorf("got %q logs %v, want one WARN with reason %q: a release %s is logged as such", c.log, logs, lease.ReasonCanceled, c.name)
				}
			})
		})
	}
}

func TestEachTransitionIsLoggedOncePerEpisode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		// The store is down for 10s (10 attempts and their releases fail),
		// then a wins at 10s; its renewals at 11s and 12s fail, so it steps
		// down at 12.5s and releases.
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.At.Before(h.at(10*time.Second)) || (c.Op == "renew" && c.N < 2) {
				return fault{kind: fail}
			}
			return fault{}
		})
		h.runUntil(13*time.Second, st, h.spec("a", time.Second), h.work("a", nil))

		want := map[string]int{
			"lease: store unreachable":     2, // the campaign's episode, the term's
			"lease: store reachable again": 2,
			"lease: release failed":        0, // unanswered attempts' releases: the episode covers them
			"lease: elected":               1,
			"lease: renew failed":          1, // two failures, one episode
			"lease: stepped down":          1,
			"lease: released":              1,
		}
		for msg, n := range want {
			logs := h.Logs(msg)
			if len(logs) != n {
				t.Errorf("got %d %q logs, want %d: once per episode, not per attempt", len(logs), msg, n)
			}
			for _, l := range logs {
				if l["lease"] != leaseKey || l["owner"] != "a" {
					t.Errorf("%q log has lease %v owner %v, want %q and %q", msg, l["lease"], l["owner"], leaseKey, "a")
				}
			}
		}
		if rf := h.Logs("lease: renew failed"); len(rf) == 1 && rf[0]["left"] != float64(1500*time.Millisecond) {
			t.Errorf("got renew failed left=%v, want 1.5s (step-down at 12.5s, failure at 11s)", rf[0]["left"])
		}
		if sd := h.Logs("lease: stepped down"); len(sd) == 1 && sd[0]["reason"] != lease.ReasonDeadline {
			t.Errorf("got stepped down reason %v, want %q", sd[0]["reason"], lease.ReasonDeadline)
		}
		if ra := h.Logs("lease: store reachable again"); len(ra) == 2 && ra[0]["down"] != float64(10*time.Second) {
			t.Errorf("got reachable again down=%v, want 10s", ra[0]["down"])
		}
	})
}

func TestRenewFailedIsLoggedOncePerEpisodeAndAgainAfterASuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		// Renewals at 1s fail, 2s succeeds, 3s and 4s fail: two episodes.
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.N != 1 {
				return fault{kind: fail}
			}
			return fault{}
		})
		h.runUntil(4200*time.Millisecond, st, h.spec("a", time.Hour), h.work("a", nil))
		rf := h.Logs("lease: renew failed")
		if len(rf) != 2 {
			t.Fatalf("got %d 'renew failed' logs, want 2: once per episode, and a success ends the episode", len(rf))
		}
		// The second episode starts at 3s; the success sent at 2s moved the
		// step-down to 4.5s.
		if rf[1]["left"] != float64(1500*time.Millisecond) {
			t.Errorf("got the second episode's left=%v, want 1.5s (step-down at 4.5s, failure at 3s)", rf[1]["left"])
		}
	})
}

func TestStickyTermKeepsWorkAndEachNewTermCallsItAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		refuseAt := 20 * ttl
		st := newFaultStore(lease.NewMemoryStore(), func(c storeCall) fault {
			if c.Op == "renew" && c.At.Equal(h.at(refuseAt)) {
				return fault{kind: refuse}
			}
			return fault{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		var ctxs []context.Context
		done := h.start(ctx, st, h.spec("a", time.Second), h.work("a", func(ctx context.Context) {
			ctxs = append(ctxs, ctx)
			<-ctx.Done()
		}))
		h.sleepUntil(refuseAt - time.Millisecond)
		if terms := h.Terms("a"); len(terms) != 1 || !terms[0].Cancelled.IsZero() {
			t.Fatalf("got terms %+v over 20 TTLs, want one still running: a healthy holder keeps its term", terms)
		}
		h.sleepUntil(refuseAt + 2*time.Second)
		cancel()
		<-done
		terms := h.Terms("a")
		if len(terms) != 2 {
			t.Fatalf("got terms %+v, want two", terms)
		}
		if terms[0].Cancelled != h.at(refuseAt) || terms[1].Start != h.at(refuseAt+time.Second) {
			t.Errorf("got the first step-down at %v and the next term at %v, want %v and Retry later", h.since(terms[0].Cancelled), h.since(terms[1].Start), refuseAt)
		}
		if len(ctxs) != 2 || ctxs[0] == ctxs[1] || ctxs[0].Err() == nil {
			t.Errorf("want work called afresh with a new context per term, the first one cancelled")
		}
	})
}
