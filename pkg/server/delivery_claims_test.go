package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"iterion.dev/iterion/internal/testing/mongotest"
	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// manualClock is a clock a test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// freezePoint is one step of a webhook's processing at which the store
// stops answering: a command held past the request's store deadline (it
// lands later, when released), or a command that lands but whose answer
// is lost.
type freezePoint struct {
	name       string
	collection string
	command    string
	drop       bool // the command lands, its answer is lost
}

var freezePoints = []freezePoint{
	{"claim held", delivery.Collection, "insert", false},
	{"claim answer lost", delivery.Collection, "insert", true},
	{"runs lookup held", gaterun.Collection, "find", false},
	{"completion held", delivery.Collection, "update", false},
	{"completion answer lost", delivery.Collection, "update", true},
}

// TestNoRedeliveryIsLost pins that a delivery is done only once it was
// processed: whatever step of it the store freezes at (a claim held past
// the deadline that lands afterwards, a claim or completion whose answer
// is lost, the runs lookup), GitHub's redelivery after the claim's hold is
// processed, never acknowledged as a duplicate unprocessed. Twenty
// deliveries each meet a freeze point drawn at random (every point at
// least once), then are redelivered until one answer is 200.
func TestNoRedeliveryIsLost(t *testing.T) {
	clock := &manualClock{now: time.Now()}
	f, ms, runs := mongoFixture(t, func(c *server.Config) {
		c.StoreTimeout, c.OfferTimeout, c.Now = time.Second, 5*time.Second, clock.Now
	})
	if _, err := runs.Put(context.Background(), gateRun(12, headSHA, gaterun.VerdictSuccess), clock.Now()); err != nil {
		t.Fatal(err)
	}
	hold := server.ClaimHold(time.Second, 5*time.Second)
	rng := rand.New(rand.NewPCG(23, 23))
	const deliveriesN = 20
	lost, processedTwice := 0, 0
	for i := range deliveriesN {
		id := fmt.Sprintf("guid-frozen-%d", i)
		// Each delivery is its own event, so its own body: one body is
		// processed once, whatever its id.
		event := fmt.Sprintf(`{"action": "synchronize", "number": 12, "pull_request": {"number": 12, "body": %q}, "repository": {"full_name": "acme/app"}}`, id)
		fp := freezePoints[i%len(freezePoints)]
		if i >= len(freezePoints) {
			fp = freezePoints[rng.IntN(len(freezePoints))]
		}
		match := func(c mongotest.Command) bool { return c.Collection == fp.collection && c.Name == fp.command }
		var release func()
		if fp.drop {
			d := ms.Proxy().DropAnswer(match)
			release = func() { <-d.Done() }
		} else {
			h := ms.Proxy().Hold(match)
			release = func() {
				h.Release()
				select {
				case <-h.Arrived():
					select {
					case <-h.Done():
					case <-time.After(10 * time.Second): // a safety net, not a timing rule
						t.Errorf("%s (%s): the held command was never answered after its release", id, fp.name)
					}
				default:
					// The request gave up before the driver sent the command
					// (a connection still being opened on a loaded machine):
					// the store did not answer all the same.
					t.Logf("%s (%s): the held command never arrived before the request gave up", id, fp.name)
				}
			}
		}
		code, body := f.postDeliveryOf(t, id, event)
		release() // a held command lands now, after its request gave up on it
		processed := strings.Contains(body, `"offered":1`)
		for try := 0; try < 3 && code != http.StatusOK; try++ {
			clock.Add(hold) // GitHub redelivers later
			code, body = f.postDeliveryOf(t, id, event)
			switch {
			case strings.Contains(body, `"duplicate"`) && !processed:
				lost++
				t.Errorf("%s (%s): redelivery got %d %s, want it processed: the first try was never processed", id, fp.name, code, body)
			case strings.Contains(body, `"offered":1`):
				if processed {
					processedTwice++
				}
				processed = true
			}
		}
		if !processed {
			lost++
			t.Errorf("%s (%s): never processed in four tries (last: %d %s)", id, fp.name, code, body)
		}
		clock.Add(hold) // a completion held and dropped must not bleed into the next id
	}
	t.Logf("%d deliveries, each frozen at a random step: %d lost, %d processed twice (a completion whose answer was lost)", deliveriesN, lost, processedTwice)
}

// TestHeldDeliveryIsNotAcknowledged pins that a delivery another replica
// is processing is answered 503 with Retry-After, not 200 duplicate: it
// may still fail, and GitHub must keep it to redeliver.
func TestHeldDeliveryIsNotAcknowledged(t *testing.T) {
	shared := delivery.NewMemoryStore()
	f := newHTTPFixture(t, func(c *server.Config) { c.Deliveries = shared })
	if c, err := shared.Claim(context.Background(), server.ReplayKey([]byte(pullClosed)), time.Now(), time.Hour); err != nil || c != delivery.Claimed {
		t.Fatalf("Claim: %v, %v", c, err)
	}
	resp, body := f.do(t, "POST", "/webhooks/github", map[string]string{"X-GitHub-Event": "pull_request",
		"X-Hub-Signature-256": sign(webhookSecret, pullClosed), "X-GitHub-Delivery": "guid-busy"}, pullClosed)
	if resp != http.StatusServiceUnavailable || strings.Contains(body, "duplicate") {
		t.Errorf("delivery claimed elsewhere: got %d %s, want 503: a delivery being processed is not acknowledged", resp, body)
	}
}

// TestDeliveryWithoutItsIDIs400 pins that a webhook without
// X-GitHub-Delivery, which GitHub always sends, or with one longer than
// any GUID (it is logged and quoted in a duplicate's answer), is refused
// with 400 naming the header and is not processed.
func TestDeliveryWithoutItsIDIs400(t *testing.T) {
	f := newHTTPFixture(t)
	f.putRun(t, gaterun.VerdictSuccess)
	for _, id := range []string{"", "", strings.Repeat("d", 101)} {
		h := map[string]string{"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": sign(webhookSecret, pullClosed)}
		if id != "" {
			h["X-GitHub-Delivery"] = id
		}
		code, body := f.do(t, "POST", "/webhooks/github", h, pullClosed)
		if code != http.StatusBadRequest || !strings.Contains(body, "X-GitHub-Delivery") {
			t.Errorf("signed delivery with id of %d bytes: got %d %s, want 400 naming X-GitHub-Delivery", len(id), code, body)
		}
	}
	if n := f.sim.Requests(forgesim.Filter{}); n != 0 {
		t.Errorf("forge requests: got %d, want 0: a delivery without its id is not processed", n)
	}
}

// laggingDeliveries adds lag to clock after each call it passes on: a
// store that answers each call just within the request's store timeout, on
// the clock the server stamps claims with. onComplete, when set, runs
// before the first Complete is passed on.
type laggingDeliveries struct {
	delivery.Store
	clock      *manualClock
	lag        time.Duration
	onComplete func()
	completing atomic.Bool
}

func (l *laggingDeliveries) Claim(ctx context.Context, id string, now time.Time, hold time.Duration) (delivery.Claim, error) {
	defer l.clock.Add(l.lag)
	return l.Store.Claim(ctx, id, now, hold)
}

func (l *laggingDeliveries) Complete(ctx context.Context, id string, now time.Time, window time.Duration) error {
	l.clock.Add(l.lag)
	if l.onComplete != nil && l.completing.CompareAndSwap(false, true) {
		l.onComplete()
	}
	return l.Store.Complete(ctx, id, now, window)
}

// laggingRuns is laggingDeliveries' twin for the runs lookup of a
// pull_request delivery.
type laggingRuns struct {
	gaterun.Store
	clock *manualClock
	lag   time.Duration
}

func (l *laggingRuns) ForPull(ctx context.Context, host, repo string, pull int) ([]gaterun.Run, error) {
	defer l.clock.Add(l.lag)
	return l.Store.ForPull(ctx, host, repo, pull)
}

// TestDeliveryClaimHoldsUntilItsCompletion pins that a delivery's claim
// holds for all of its processing: the claim, the runs lookup, the offers
// and the completion, each store call answered just within the store
// timeout. A redelivery that reaches another replica while the completion
// is on its way is held (503), never processed a second time at once.
func TestDeliveryClaimHoldsUntilItsCompletion(t *testing.T) {
	clock := &manualClock{now: time.Now()}
	const storeTimeout = time.Second
	runs := gaterun.NewMemoryStore()
	if _, err := runs.Put(context.Background(), gateRun(12, headSHA, gaterun.VerdictSuccess), clock.Now()); err != nil {
		t.Fatal(err)
	}
	deliveries := &laggingDeliveries{Store: delivery.NewMemoryStore(), clock: clock, lag: storeTimeout - time.Millisecond}
	lookups := &laggingRuns{Store: runs, clock: clock, lag: storeTimeout - time.Millisecond}
	cfg := func(c *server.Config) {
		c.Runs, c.Deliveries, c.Now = lookups, deliveries, clock.Now
		c.StoreTimeout, c.OfferTimeout = storeTimeout, time.Millisecond
	}
	a, b := newHTTPFixture(t, cfg), newHTTPFixture(t, cfg)
	var redelivered string
	deliveries.onComplete = func() { // on a handler's goroutine: no t.Fatal here
		req, err := http.NewRequest("POST", b.url+"/webhooks/github", strings.NewReader(pullClosed))
		if err != nil {
			redelivered = err.Error()
			return
		}
		for k, v := range deliveryHeaders("guid-slow") {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			redelivered = err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		redelivered = fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(body)))
	}
	if code, body := a.postDelivery(t, "guid-slow"); code != http.StatusOK {
		t.Fatalf("first delivery: got %d %s, want 200", code, body)
	}
	if !strings.HasPrefix(redelivered, "503 ") {
		t.Errorf("redelivery to another replica during the completion: got %s, want 503: a claim holds until its processing ends, so one delivery is never processed twice at once", redelivered)
	}
}

// failingClaims is a delivery store whose claims fail, as a store that
// does not answer in time does: the claim may still have landed.
type failingClaims struct{ delivery.Store }

func (failingClaims) Claim(context.Context, string, time.Time, time.Duration) (delivery.Claim, error) {
	return 0, errors.New("delivery store: claim timed out")
}

// TestAFailedClaimSaysToRetryWhenItsHoldHasLapsed pins the Retry-After of
// a delivery whose claim failed: the claim may have landed, and until its
// hold lapses a redelivery is held (503) again, so the answer asks for
// the redelivery after the whole hold, not after a store timeout, in
// whole seconds rounded up (the hold here is 9.5 s: Retry-After 10).
func TestAFailedClaimSaysToRetryWhenItsHoldHasLapsed(t *testing.T) {
	const storeTimeout, offerTimeout = time.Second, 2250 * time.Millisecond
	f := newHTTPFixture(t, func(c *server.Config) {
		c.Deliveries, c.StoreTimeout, c.OfferTimeout = failingClaims{delivery.NewMemoryStore()}, storeTimeout, offerTimeout
	})
	code, h, body := f.doHeader(t, "POST", "/webhooks/github", deliveryHeaders("guid-unclaimed"), pullClosed)
	want := strconv.Itoa(int(math.Ceil(server.ClaimHold(storeTimeout, offerTimeout).Seconds())))
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") != want {
		t.Errorf("claim failed: got %d Retry-After %q (%s), want 503 Retry-After %s: the claim may have landed and holds that long", code, h.Get("Retry-After"), body, want)
	}
}
