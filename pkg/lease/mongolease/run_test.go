package mongolease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/lease"
	"iterion.dev/iterion/pkg/lease/mongolease"
)

// leaseKey is the lease these tests elect.
const leaseKey = "net"

// These tests run Run on the Mongo twin through the fault proxy of
// internal/testing/mongotest, in real time: the store's I/O is real. TTLs are short
// and every wait is bounded by a channel or a deadline, never a sleep.

// timeline records the events of several Runs in real time, in the order
// they happened (OnEvent is synchronous), and lets a test wait for one.
type timeline struct {
	mu     sync.Mutex
	events []lease.Event
	cond   chan struct{} // closed and replaced on every event
}

func newTimeline() *timeline { return &timeline{cond: make(chan struct{})} }

func (tl *timeline) record(e lease.Event) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, e)
	close(tl.cond)
	tl.cond = make(chan struct{})
}

// find returns the index and event of the first event of owner and kind
// from index from on, or -1.
func (tl *timeline) find(from int, owner string, kind lease.EventKind) (int, lease.Event) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := from; i < len(tl.events); i++ {
		if e := tl.events[i]; e.Owner == owner && e.Kind == kind {
			return i, e
		}
	}
	return -1, lease.Event{}
}

// await waits up to limit for an event of owner and kind from index from on,
// and fails the test when none comes.
func (tl *timeline) await(t *testing.T, from int, owner string, kind lease.EventKind, limit time.Duration) (int, lease.Event) {
	t.Helper()
	var i int
	var e lease.Event
	tl.waitFor(t, limit, fmt.Sprintf("%v event of %s", kind, owner), func() bool {
		i, e = tl.find(from, owner, kind)
		return i >= 0
	})
	return i, e
}

// waitFor waits up to limit for found to report true, checking it again on
// every event, and fails the test when it does not.
func (tl *timeline) waitFor(t *testing.T, limit time.Duration, what string, found func() bool) {
	t.Helper()
	deadline := time.After(limit)
	for {
		tl.mu.Lock()
		cond := tl.cond
		tl.mu.Unlock()
		if found() {
			return
		}
		select {
		case <-cond:
		case <-deadline:
			t.Fatalf("no %s within %v; events: %+v", what, limit, tl.all())
		}
	}
}

func (tl *timeline) all() []lease.Event {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]lease.Event(nil), tl.events...)
}

// mongoSpec is the Spec of owner for the Mongo tests.
func mongoSpec(tl *timeline, owner string, ttl, retry time.Duration) lease.Spec {
	return lease.Spec{Name: leaseKey, Owner: owner, TTL: ttl, Retry: retry, OnEvent: tl.record}
}

// leaseCommand matches the wire command MongoStore sends for op ("acquire":
// the update whose last statement, after the shape probe and, for
// AcquireTerm, its two term updates, is the upsert; "renew": the one whose
// second and last is a plain update; "release": the delete; "": any of
// them) on behalf of owner.
func leaseCommand(op, owner string) func(mongotest.Command) bool {
	return func(c mongotest.Command) bool {
		if c.Collection != mongolease.Collection {
			return false
		}
		last := "1"
		if stmts, ok := c.Body.Lookup("updates").ArrayOK(); ok {
			if vals, err := stmts.Values(); err == nil && len(vals) > 0 {
				last = fmt.Sprint(len(vals) - 1)
			}
		}
		upsert, _ := c.Body.Lookup("updates", last, "upsert").BooleanOK()
		isAcquire := c.Name == "update" && upsert && lookupString(c, "updates", last, "u", "$set", "owner") == owner
		isRenew := c.Name == "update" && last == "1" && !upsert && lookupString(c, "updates", "1", "q", "owner", "$eq") == owner
		isRelease := c.Name == "delete" && lookupString(c, "deletes", "0", "q", "owner", "$eq") == owner
		switch op {
		case "acquire":
			return isAcquire
		case "renew":
			return isRenew
		case "release":
			return isRelease
		}
		return isAcquire || isRenew || isRelease
	}
}

func lookupString(c mongotest.Command, keys ...string) string {
	s, _ := c.Body.Lookup(keys...).StringValueOK()
	return s
}

// twoClients returns two databases of the same name on srv, through two
// clients: two replicas sharing one store.
func twoClients(t *testing.T, srv *mongotest.Server) (*mongo.Database, *mongo.Database) {
	a := srv.DB(t)
	return a, srv.Client(t).Database(a.Name())
}

// runBackground starts Run and returns a function that stops it and waits
// for it, failing the test if it does not return within limit.
func runBackground(t *testing.T, st lease.Store, spec lease.Spec, work func(context.Context)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lease.Run(ctx, st, spec, work) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run(%s) = %v, want nil", spec.Owner, err)
			}
		case <-time.After(10 * spec.TTL):
			t.Errorf("Run(%s) did not return within %v of its ctx being done", spec.Owner, 10*spec.TTL)
		}
	}
	t.Cleanup(stop)
	return stop
}

func waitCtx(ctx context.Context) { <-ctx.Done() }

// electedPair starts a on srv, waits for its election, then starts b, each
// through its own client: a holder and a candidate.
func electedPair(t *testing.T, srv *mongotest.Server, ttl, retryA, retryB time.Duration) *timeline {
	dbA, dbB := twoClients(t, srv)
	tl := newTimeline()
	runBackground(t, mongolease.NewStore(dbA), mongoSpec(tl, "a", ttl, retryA), waitCtx)
	tl.await(t, 0, "a", lease.Elected, 5*time.Second)
	runBackground(t, mongolease.NewStore(dbB), mongoSpec(tl, "b", ttl, retryB), waitCtx)
	return tl
}

func TestRunMongoRenewalHeldUntilAfterReleaseDoesNotRecreateTheLease(t *testing.T) {
	// TTL 3s: a's only Acquire (Retry is an hour) is cut after TTL/3, which
	// must outlast an Acquire on a loaded machine (at 600 ms, 200 ms did not).
	const ttl = 3 * time.Second
	srv := mongotest.NewServer(t)
	st := mongolease.NewStore(srv.DB(t))
	tl := newTimeline()
	finish := make(chan struct{})
	hold := srv.Proxy().Hold(leaseCommand("renew", "a"))
	// Retry is long: after its term, a does not campaign again during the test.
	stop := runBackground(t, st, mongoSpec(tl, "a", ttl, time.Hour), func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-finish:
		}
	})
	tl.await(t, 0, "a", lease.Elected, 5*time.Second)
	select {
	case <-hold.Arrived():
	case <-time.After(5 * time.Second):
		t.Fatal("a's first renewal never reached the proxy")
	}
	close(finish) // the term ends while its renewal is held in the network
	tl.await(t, 0, "a", lease.Released, 5*time.Second)
	hs, err := st.Holders(context.Background())
	if err != nil || len(hs) != 0 {
		t.Fatalf("after the release: Holders = %+v, %v; want none", hs, err)
	}

	hold.Release() // the renewal lands after the release
	select {
	case <-hold.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the held renewal was never answered by the backend")
	}
	if err := hold.Err(); err != nil {
		t.Fatalf("the held renewal was not delivered: %v", err)
	}
	hs, err = st.Holders(context.Background())
	if err != nil || len(hs) != 0 {
		t.Errorf("after the late renewal landed: Holders = %+v, %v; want none: a renewal never re-creates a released lease", hs, err)
	}
	stop()
}

func TestRunMongoAcquireWhoseAnswerIsDroppedIsFollowedByARelease(t *testing.T) {
	// TTL 3s: without the release, b would wait for the landed write's
	// expiry, 3s; with it, b's next attempt (every 100ms) wins.
	const ttl = 3 * time.Second
	srv := mongotest.NewServer(t)
	dbA, dbB := twoClients(t, srv)
	tl := newTimeline()
	drop := srv.Proxy().DropAnswer(leaseCommand("acquire", "a"))
	runBackground(t, mongolease.NewStore(dbA), mongoSpec(tl, "a", ttl, time.Hour), waitCtx)
	select {
	case <-drop.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a's Acquire never reached the proxy")
	}
	landed := time.Now()
	runBackground(t, mongolease.NewStore(dbB), mongoSpec(tl, "b", ttl, 100*time.Millisecond), waitCtx)
	_, rel := tl.await(t, 0, "a", lease.Released, ttl/3+2*time.Second)
	if rel.Reason != lease.ReasonUnanswered {
		t.Errorf("got a release with reason %q, want %q", rel.Reason, lease.ReasonUnanswered)
	}
	_, won := tl.await(t, 0, "b", lease.Elected, ttl)
	if wait := won.At.Sub(landed); wait >= ttl/2 {
		t.Errorf("b was elected %v after a's write landed, want well under the TTL %v: the unanswered Acquire is released", wait, ttl)
	}
	if i, _ := tl.find(0, "a", lease.Elected); i >= 0 {
		t.Errorf("a was elected, want not: its Acquire went unanswered and Retry is an hour")
	}
}

func TestRunMongoPartitionedHolderStepsDownBeforeTheSuccessorIsElected(t *testing.T) {
	const ttl = 600 * time.Millisecond
	srv := mongotest.NewServer(t)
	tl := electedPair(t, srv, ttl, 100*time.Millisecond, 50*time.Millisecond)

	// Partition a alone: every lease command of a is held in the network
	// from now on (Proxy.Refuse would cut b too). Its release is among them,
	// so b must wait for the expiry of a's last renewal.
	for range 200 {
		srv.Proxy().Hold(leaseCommand("", "a"))
	}
	partitioned := time.Now()
	iDown, down := tl.await(t, 0, "a", lease.SteppedDown, 5*time.Second)
	iWon, won := tl.await(t, 0, "b", lease.Elected, 5*time.Second)
	if down.Reason != lease.ReasonDeadline {
		t.Errorf("got a's step-down reason %q, want %q", down.Reason, lease.ReasonDeadline)
	}
	if iDown > iWon || !down.At.Before(won.At) {
		t.Errorf("a stepped down at +%v, b was elected at +%v (event %d vs %d): the holder must be gone before any successor",
			down.At.Sub(partitioned), won.At.Sub(partitioned), iDown, iWon)
	}
	// The exact deadline is pinned in virtual time; here, in real time, the
	// bound is the one that matters: before a's lease could expire.
	if lag := down.At.Sub(partitioned); lag >= ttl {
		t.Errorf("a stepped down %v after the partition, want under the TTL %v (due at TTL−TTL/6 = %v)", lag, ttl, ttl-ttl/6)
	}
	if i, _ := tl.find(iDown+1, "a", lease.Elected); i >= 0 {
		t.Errorf("a was elected again while partitioned")
	}
}

func TestRunMongoRefusingStoreStepsTheHolderDownAndElectsNobody(t *testing.T) {
	const ttl = 600 * time.Millisecond
	srv := mongotest.NewServer(t)
	tl := electedPair(t, srv, ttl, 50*time.Millisecond, 50*time.Millisecond)

	srv.Proxy().Refuse(true) // nobody reaches the store
	refused := time.Now()
	iDown, down := tl.await(t, 0, "a", lease.SteppedDown, 5*time.Second)
	if lag := down.At.Sub(refused); lag >= ttl {
		t.Errorf("a stepped down %v after the store became unreachable, want under the TTL %v (due at TTL−TTL/6 = %v)", lag, ttl, ttl-ttl/6)
	}
	// Stay partitioned for two TTLs past the step-down: nobody is elected.
	timer := time.NewTimer(2 * ttl)
	<-timer.C
	for _, o := range []string{"a", "b"} {
		if i, e := tl.find(iDown, o, lease.Elected); i >= 0 {
			t.Errorf("%s was elected at +%v while the store refused every connection: a store that cannot answer elects nobody", o, e.At.Sub(refused))
		}
	}
	srv.Proxy().Refuse(false)
	tl.waitFor(t, 10*time.Second, "election once the store came back", func() bool {
		ia, _ := tl.find(iDown, "a", lease.Elected)
		ib, _ := tl.find(iDown, "b", lease.Elected)
		return ia >= 0 || ib >= 0
	})
}

// TestRunMongoLateReleaseOfAnEarlierTermKeepsTheLaterTerm pins the
// term-scoped release: a's release of its first term is held in the network
// until a has won its next term; when it lands, it deletes nothing, and the
// later term's lease survives.
func TestRunMongoLateReleaseOfAnEarlierTermKeepsTheLaterTerm(t *testing.T) {
	const ttl = 600 * time.Millisecond
	srv := mongotest.NewServer(t)
	st := mongolease.NewStore(srv.DB(t))
	tl := newTimeline()
	finish := make(chan struct{})
	hold := srv.Proxy().Hold(leaseCommand("release", "a"))
	defer hold.Release()
	terms := 0
	runBackground(t, st, mongoSpec(tl, "a", ttl, 100*time.Millisecond), func(ctx context.Context) {
		terms++
		if terms == 1 {
			<-finish // the first term ends when the test says so
			return
		}
		<-ctx.Done()
	})
	first, _ := tl.await(t, 0, "a", lease.Elected, 5*time.Second)
	close(finish)
	select {
	case <-hold.Arrived():
	case <-time.After(5 * time.Second):
		t.Fatal("a's release of its first term never reached the proxy")
	}
	// The held release is cut after TTL/3; a campaigns again and wins.
	tl.await(t, first+1, "a", lease.Elected, 5*time.Second)

	hold.Release() // the first term's release lands during the second term
	select {
	case <-hold.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the held release was never answered by the backend")
	}
	if err := hold.Err(); err != nil {
		t.Fatalf("the held release was not delivered: %v", err)
	}
	hs, err := st.Holders(context.Background())
	if err != nil || len(hs) != 1 || hs[0].Owner != "a" {
		t.Fatalf("after the late release landed: Holders = %+v, %v; want a's lease: a late release of an earlier term never deletes a later term's lease", hs, err)
	}
	if ok, err := st.Acquire(context.Background(), leaseKey, "b", time.Now(), ttl); ok || err != nil {
		t.Errorf("b's Acquire after the late release = %v, %v; want false, nil: the later term still holds the lease", ok, err)
	}
}

// TestRunMongoShutdownWithHeldRenewalAndReleaseLandingFirst pins a
// shutdown whose renewal and release are both held in the network, the
// release landing first: the release frees the lease, and the renewal,
// landing after it, does not re-create it.
func TestRunMongoShutdownWithHeldRenewalAndReleaseLandingFirst(t *testing.T) {
	const ttl = 600 * time.Millisecond
	srv := mongotest.NewServer(t)
	st := mongolease.NewStore(srv.DB(t))
	tl := newTimeline()
	renewal := srv.Proxy().Hold(leaseCommand("renew", "a"))
	defer renewal.Release()
	release := srv.Proxy().Hold(leaseCommand("release", "a"))
	defer release.Release()
	// Retry is short: a first attempt slower than TTL/3 (a loaded test
	// server) is retried rather than failing the test.
	stop := runBackground(t, st, mongoSpec(tl, "a", ttl, 100*time.Millisecond), waitCtx)
	tl.await(t, 0, "a", lease.Elected, 5*time.Second)
	select {
	case <-renewal.Arrived():
	case <-time.After(5 * time.Second):
		t.Fatal("a's first renewal never reached the proxy")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }() // shutdown while the renewal is held
	select {
	case <-release.Arrived():
	case <-time.After(5 * time.Second):
		t.Fatal("a's release never reached the proxy")
	}
	release.Release()
	<-release.Done()
	if err := release.Err(); err != nil {
		t.Fatalf("the held release was not delivered: %v", err)
	}
	<-stopped
	renewal.Release() // the renewal lands after the release
	<-renewal.Done()
	if err := renewal.Err(); err != nil {
		t.Fatalf("the held renewal was not delivered: %v", err)
	}
	hs, err := st.Holders(context.Background())
	if err != nil || len(hs) != 0 {
		t.Errorf("after the release, then the renewal, landed: Holders = %+v, %v; want none: the release frees the lease and a late renewal never re-creates it", hs, err)
	}
	if _, rel := tl.await(t, 0, "a", lease.Released, time.Second); rel.Reason != lease.ReasonCanceled {
		t.Errorf("got a release with reason %q, want %q", rel.Reason, lease.ReasonCanceled)
	}
}
