package leasetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"iterion.dev/iterion/pkg/lease"
)

// world is one group case: members of one group on one shared store, in a
// synctest bubble, and the events they reported. Safe for concurrent use.
type world struct {
	t    *testing.T
	t0   time.Time
	b    *bridge
	spec lease.GroupSpec // every member's, Owner aside
	late sync.WaitGroup

	mu      sync.Mutex
	events  []lease.Event // every shard term's Elected and SteppedDown, in order
	members map[string]*member
	trace   []string // every shard call and transition, for a failure's message
}

// note adds a line to the trace, at the virtual instant.
func (w *world) note(format string, args ...any) {
	line := fmt.Sprintf("%v ", time.Since(w.t0)) + fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, line)
}

// member is one RunGroup of the world.
type member struct {
	view *memberView
	stop context.CancelFunc
	done chan struct{}
}

// newWorld returns a world over b for the group spec; call it in the
// bubble.
func newWorld(t *testing.T, b *bridge, spec lease.GroupSpec) *world {
	return &world{t: t, t0: time.Now(), b: b, spec: spec, members: map[string]*member{}}
}

// at is the instant d after the world began.
func (w *world) at(d time.Duration) time.Time { return w.t0.Add(d) }

// sleepUntil sleeps until d after the world began, then until every
// goroutine of the bubble is blocked.
func (w *world) sleepUntil(d time.Duration) {
	time.Sleep(time.Until(w.at(d)))
	synctest.Wait()
}

// record keeps a shard term's transitions.
func (w *world) record(e lease.Event) {
	if e.Kind == lease.Released && e.Shard >= 0 {
		w.note("%s released shard %d (%s)", e.Owner, e.Shard, e.Reason)
	}
	if e.Kind != lease.Elected && e.Kind != lease.SteppedDown {
		return
	}
	w.note("%s %s shard %d %s", e.Owner, e.Kind, e.Shard, e.Reason)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

// start starts member owner; its work waits for its term to end.
func (w *world) start(owner string) *member {
	return w.startWork(owner, func(ctx context.Context, _ int) { <-ctx.Done() })
}

// startWork starts member owner with work.
func (w *world) startWork(owner string, work func(context.Context, int)) *member {
	m := &member{view: &memberView{b: w.b, owner: owner, trace: w.note, late: &w.late, calls: map[string]int{}}, done: make(chan struct{})}
	spec := w.spec
	spec.Owner, spec.OnEvent = owner, w.record
	ctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go func() {
		defer close(m.done)
		if err := lease.RunGroup(ctx, m.view, spec, work); err != nil {
			w.t.Errorf("RunGroup(%s) = %v, want nil", owner, err)
		}
	}()
	w.mu.Lock()
	w.members[owner] = m
	w.mu.Unlock()
	return m
}

// leave stops member owner cleanly and waits for it.
func (w *world) leave(owner string) {
	m := w.member(owner)
	m.stop()
	<-m.done
}

// kill stops member owner as kill -9 would: every call it makes from now
// fails, so it releases nothing; its leases stay until they expire.
func (w *world) kill(owner string) {
	m := w.member(owner)
	m.view.setPlan(func(string, string) fault { return fault{fail: true} })
	m.stop()
	<-m.done
}

func (w *world) member(owner string) *member {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.members[owner]
}

// end stops every member, waits for them and for the calls still held,
// and checks the rule every case keeps: no two terms of a shard overlap.
func (w *world) end() {
	w.mu.Lock()
	ms := make([]*member, 0, len(w.members))
	for _, m := range w.members {
		ms = append(ms, m)
	}
	w.mu.Unlock()
	for _, m := range ms {
		m.stop()
		<-m.done
	}
	w.late.Wait()
	errs := w.overlaps()
	for _, err := range errs {
		w.t.Error(err)
	}
	if len(errs) > 0 {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.t.Logf("the schedule's shard calls and transitions:\n%s", strings.Join(w.trace, "\n"))
	}
}

// overlaps returns an error for each term elected while another term of
// its shard had not stepped down.
func (w *world) overlaps() (errs []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	type overlap struct{ prev, next lease.Event }
	open := map[int][]lease.Event{}
	var pending []overlap
	for _, e := range w.events {
		switch e.Kind {
		case lease.Elected:
			for _, prev := range open[e.Shard] {
				pending = append(pending, overlap{prev, e})
			}
			open[e.Shard] = append(open[e.Shard], e)
		case lease.SteppedDown:
			i := slices.IndexFunc(open[e.Shard], func(o lease.Event) bool { return o.Owner == e.Owner })
			if i < 0 {
				continue
			}
			term := open[e.Shard][i]
			open[e.Shard] = slices.Delete(open[e.Shard], i, i+1)
			pending = slices.DeleteFunc(pending, func(o overlap) bool {
				if o.prev != term {
					return false
				}
				errs = append(errs, fmt.Errorf("shard %d: %s elected at %v while %s's term from %v had not stepped down (it did %v later, %s): no two terms of a shard overlap",
					o.next.Shard, o.next.Owner, o.next.At.Sub(w.t0), term.Owner, term.At.Sub(w.t0), e.At.Sub(o.next.At), e.Reason))
				return true
			})
		}
	}
	for _, o := range pending {
		errs = append(errs, fmt.Errorf("shard %d: %s elected at %v while %s's term from %v never stepped down: no two terms of a shard overlap",
			o.next.Shard, o.next.Owner, o.next.At.Sub(w.t0), o.prev.Owner, o.prev.At.Sub(w.t0)))
	}
	return errs
}

// holding returns each shard's current holder as the events tell ("" for
// none).
func (w *world) holding() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, w.spec.Shards)
	for _, e := range w.events {
		switch e.Kind {
		case lease.Elected:
			out[e.Shard] = e.Owner
		case lease.SteppedDown:
			out[e.Shard] = ""
		}
	}
	return out
}

// counts returns how many shards each owner holds now, as "owner=n"
// sorted, with "unheld=n" when some shard is unheld.
func (w *world) counts() []string {
	by := map[string]int{}
	for _, h := range w.holding() {
		if h == "" {
			h = "unheld"
		}
		by[h]++
	}
	var out []string
	for o, n := range by {
		out = append(out, fmt.Sprintf("%s=%d", o, n))
	}
	slices.Sort(out)
	return out
}

// since returns the shard terms' events from instant d on, of kind (0 for
// both).
func (w *world) since(d time.Duration, kind lease.EventKind) []lease.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []lease.Event
	for _, e := range w.events {
		if !e.At.Before(w.at(d)) && (kind == 0 || e.Kind == kind) {
			out = append(out, e)
		}
	}
	return out
}

// gaps returns, for every shard term elected from instant d on after a
// step-down of its shard, how long the shard was without a holder before
// it.
func (w *world) gaps(d time.Duration) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	down := map[int]time.Time{}
	var out []time.Duration
	for _, e := range w.events {
		switch e.Kind {
		case lease.SteppedDown:
			down[e.Shard] = e.At
		case lease.Elected:
			if s, ok := down[e.Shard]; ok && !e.At.Before(w.at(d)) {
				out = append(out, e.At.Sub(s))
			}
			delete(down, e.Shard)
		}
	}
	return out
}

// shares returns how many shards each member holds, largest first, with
// unheld shards counted as "unheld=n" at the end.
func (w *world) shares() string {
	by := map[string]int{}
	unheld := 0
	for _, h := range w.holding() {
		if h == "" {
			unheld++
			continue
		}
		by[h]++
	}
	var out []string
	for _, n := range slices.Sorted(maps.Values(by)) {
		out = append([]string{fmt.Sprint(n)}, out...)
	}
	if unheld > 0 {
		out = append(out, fmt.Sprintf("unheld=%d", unheld))
	}
	return fmt.Sprint(out)
}
