package server_test

// A webhook delivery is answered within --webhook-answer-within, under
// GitHub's 10 s, however long its processing takes; in virtual time.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge/forgesim"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/server"
)

// forgeAnswersIn makes every REST answer of p's forge take d: an offer of
// acme/app#12 reads the pull and its head's status and writes the status,
// so it takes 3d.
func forgeAnswersIn(t *testing.T, p *pipeServer, d time.Duration) {
	t.Helper()
	if err := p.sim.SetLatency(forgesim.Latency{RESTDefault: d}); err != nil {
		t.Fatal(err)
	}
}

// deliveriesOutcome is webhook_deliveries_total{outcome} in reg.
func deliveriesOutcome(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	return metric(t, reg, "webhook_deliveries_total", "outcome", outcome).GetCounter().GetValue()
}

// withRun stores run acme/app#12 at headSHA in runs and serves from them,
// counting into reg.
func withRun(t *testing.T, runs gaterun.Store, reg *prometheus.Registry) func(*server.Config) {
	t.Helper()
	if _, err := runs.Put(context.Background(), gateRun(12, headSHA, gaterun.VerdictSuccess), time.Now()); err != nil {
		t.Fatal(err)
	}
	return func(c *server.Config) { c.Runs, c.Registry = runs, reg }
}

func TestSlowDeliveryIsAnswered202AtTheDeadlineAndStillProcessed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p := newPipeServer(t, withRun(t, gaterun.NewMemoryStore(), reg))
		defer p.stop()
		forgeAnswersIn(t, p, 3*time.Second) // the offer takes 9 s
		start := time.Now()
		code, body := p.post(t, "/webhooks/github", deliveryHeaders("guid-slow"), pullClosed)
		if took := time.Since(start); code != http.StatusAccepted || took != server.DefaultWebhookAnswerWithin || !strings.Contains(body, `"processing":"guid-slow"`) {
			t.Fatalf("delivery whose offer takes 9 s: got %d %s after %v, want 202 processing guid-slow after %v: a delivery is answered within --webhook-answer-within, under GitHub's 10 s",
				code, body, took, server.DefaultWebhookAnswerWithin)
		}
		time.Sleep(10 * time.Second) // the offer's end, and the completion
		synctest.Wait()
		for _, c := range []struct {
			outcome string
			want    float64
		}{{"answered_before_processed", 1}, {"processed_after_answer", 1}, {"failed_after_answer", 0}, {"processed", 0}} {
			if got := deliveriesOutcome(t, reg, c.outcome); got != c.want {
				t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want %v: the delivery answered early was processed afterwards", c.outcome, got, c.want)
			}
		}
		if n := p.sim.Requests(forgesim.Filter{Method: "POST"}); n != 1 {
			t.Errorf("statuses written: got %d, want 1: the processing goes on after the answer", n)
		}
		code, body = p.post(t, "/webhooks/github", deliveryHeaders("guid-slow"), pullClosed)
		if code != http.StatusOK || !strings.Contains(body, `"duplicate":"guid-slow"`) {
			t.Errorf("redelivery after the processing: got %d %s, want 200 duplicate: its claim was completed after the answer", code, body)
		}
	})
}

// stallingRuns is a run store whose pull lookups do not answer (until
// their context ends) while stall is set.
type stallingRuns struct {
	gaterun.Store
	stall atomic.Bool
}

func (s *stallingRuns) ForPull(ctx context.Context, host, repo string, pull int) ([]gaterun.Run, error) {
	if s.stall.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.ForPull(ctx, host, repo, pull)
}

func TestDeliveryFailingAfterItsAnswerIsProcessedOnRedelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		runs := &stallingRuns{Store: gaterun.NewMemoryStore()}
		runs.stall.Store(true)
		const answerWithin, storeTimeout = 2 * time.Second, 3 * time.Second
		p := newPipeServer(t, withRun(t, runs, reg), func(c *server.Config) {
			c.WebhookAnswerWithin, c.StoreTimeout = answerWithin, storeTimeout
		})
		defer p.stop()
		hold := server.ClaimHold(storeTimeout, 10*time.Second) // the default offer timeout
		start := time.Now()
		code, body := p.post(t, "/webhooks/github", deliveryHeaders("guid-stalled"), pullClosed)
		if took := time.Since(start); code != http.StatusAccepted || took != answerWithin {
			t.Fatalf("delivery whose runs lookup stalls: got %d %s after %v, want 202 after %v: the answer does not wait for the store timeout",
				code, body, took, answerWithin)
		}
		time.Sleep(storeTimeout) // the lookup fails after the answer
		synctest.Wait()
		if got := deliveriesOutcome(t, reg, "failed_after_answer"); got != 1 {
			t.Errorf("webhook_deliveries_total{outcome=\"failed_after_answer\"}: got %v, want 1: a failure after the answer is counted", got)
		}
		code, body = p.post(t, "/webhooks/github", deliveryHeaders("guid-stalled"), pullClosed)
		if code != http.StatusServiceUnavailable {
			t.Errorf("redelivery within the claim's hold: got %d %s, want 503: the claim still holds, and was not completed", code, body)
		}
		runs.stall.Store(false)
		time.Sleep(hold - time.Since(start)) // the claim lapses
		code, body = p.post(t, "/webhooks/github", deliveryHeaders("guid-stalled"), pullClosed)
		if code != http.StatusOK || !strings.Contains(body, `"offered":1`) {
			t.Errorf("redelivery after the claim's hold: got %d %s, want 200 offered 1: a delivery that failed after its answer is processed when redelivered", code, body)
		}
	})
}

// stallingClaims is a delivery store whose claims do not answer until
// their context ends.
type stallingClaims struct{ delivery.Store }

func (stallingClaims) Claim(ctx context.Context, _ string, _ time.Time, _ time.Duration) (delivery.Claim, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestAClaimIsAnsweredByTheAnswersDeadline pins that a delivery's claim
// is bounded by --webhook-answer-within, counted from the request's
// headers, as well as by the store timeout: a claim whose store does not
// answer is answered 503, with the claim's hold as Retry-After (it may
// have landed), at that deadline, under GitHub's 10 s, when the store
// timeout would end it later, whether it is longer than the deadline or
// started late because the body came late.
func TestAClaimIsAnsweredByTheAnswersDeadline(t *testing.T) {
	cases := []struct {
		name         string
		storeTimeout time.Duration
		bodyAfter    time.Duration // after the headers
		why          string
	}{
		{"store timeout past the deadline", 10 * time.Second, 0,
			"the store timeout (10 s) would end the claim 2 s after the deadline"},
		{"body arriving late", server.DefaultStoreTimeout, 6 * time.Second,
			"the claim starts 6 s after the headers, and its store timeout would end it 1 s after the deadline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPipeServer(t, func(c *server.Config) {
					c.Deliveries, c.StoreTimeout = stallingClaims{delivery.NewMemoryStore()}, tc.storeTimeout
				})
				defer p.stop()
				head := fmt.Sprintf("POST /webhooks/github HTTP/1.1\r\nHost: iterion.test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(pullClosed))
				for k, v := range deliveryHeaders("guid-unclaimed") {
					head += k + ": " + v + "\r\n"
				}
				conn, err := p.pn.Dial(context.Background(), "", "")
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				start := time.Now()
				go func() {
					_, _ = io.WriteString(conn, head+"\r\n")
					time.Sleep(tc.bodyAfter)
					_, _ = io.WriteString(conn, pullClosed)
				}()
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				resp.Body.Close()
				took := time.Since(start)
				retry := strconv.Itoa(int(math.Ceil(server.ClaimHold(tc.storeTimeout, 10*time.Second).Seconds()))) // the default offer timeout
				if resp.StatusCode != http.StatusServiceUnavailable || took != server.DefaultWebhookAnswerWithin || resp.Header.Get("Retry-After") != retry {
					t.Errorf("claim the store does not answer: got %d Retry-After %q after %v, want 503 Retry-After %s after %v: a claim is bounded by --webhook-answer-within from the headers; %s",
						resp.StatusCode, resp.Header.Get("Retry-After"), took, retry, server.DefaultWebhookAnswerWithin, tc.why)
				}
			})
		})
	}
}

func TestFastDeliveryIsAnsweredWithItsOffers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p := newPipeServer(t, withRun(t, gaterun.NewMemoryStore(), reg))
		defer p.stop()
		forgeAnswersIn(t, p, time.Second) // the offer takes 3 s
		code, body := p.post(t, "/webhooks/github", deliveryHeaders("guid-fast"), pullClosed)
		if code != http.StatusOK || body != `{"offered":1}` {
			t.Errorf("delivery processed in 3 s: got %d %s, want 200 {\"offered\":1}: a delivery processed in time is answered with its offers", code, body)
		}
		if got, early := deliveriesOutcome(t, reg, "processed"), deliveriesOutcome(t, reg, "answered_before_processed"); got != 1 || early != 0 {
			t.Errorf("webhook_deliveries_total processed %v, answered_before_processed %v: want 1 and 0", got, early)
		}
	})
}

func TestShutdownFinishesTheDeliveriesBeingProcessed(t *testing.T) {
	for _, c := range []struct {
		name     string
		shutdown time.Duration
		want     delivery.Claim
		outcome  string // the end counted in webhook_deliveries_total
		why      string
	}{
		{"within the shutdown timeout", 10 * time.Second, delivery.Done, "processed_after_answer",
			"Run waits for a delivery answered early to be processed and recorded"},
		{"past the shutdown timeout", 3 * time.Second, delivery.Held, "failed_after_answer",
			"Run cancels what is left at the shutdown timeout, and the delivery is not recorded as processed: its claim lapses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				deliveries := delivery.NewMemoryStore()
				p, stop := runPipeServer(t, withRun(t, gaterun.NewMemoryStore(), reg), func(cfg *server.Config) {
					cfg.Deliveries, cfg.WebhookAnswerWithin, cfg.ShutdownTimeout = deliveries, 2*time.Second, c.shutdown
				})
				forgeAnswersIn(t, p, 3*time.Second) // the offer takes 9 s
				if code, body := p.post(t, "/webhooks/github", deliveryHeaders("guid-shutdown"), pullClosed); code != http.StatusAccepted {
					t.Errorf("delivery whose offer takes 9 s: got %d %s, want 202", code, body) // not Fatal: stop must run
				}
				stopping := time.Now()
				if err := stop(); err != nil {
					t.Errorf("Run: %v", err)
				}
				if took := time.Since(stopping); took > c.shutdown+time.Second { // stop's own second of lingering
					t.Errorf("Run returned %v after its context ended, want within the shutdown timeout %v", took, c.shutdown)
				}
				got, err := deliveries.Claim(context.Background(), server.ReplayKey([]byte(pullClosed)), time.Now(), time.Second)
				if err != nil || got != c.want {
					t.Errorf("the delivery after Run returned: got %v, %v, want %v: %s", got, err, c.want, c.why)
				}
				if n := deliveriesOutcome(t, reg, c.outcome); n != 1 {
					t.Errorf("webhook_deliveries_total{outcome=%q}: got %v, want 1: %s", c.outcome, n, c.why)
				}
			})
		})
	}
}

// unrecordingDeliveries is a delivery store whose completions fail, as a
// store that does not answer a write in time does.
type unrecordingDeliveries struct{ delivery.Store }

func (unrecordingDeliveries) Complete(context.Context, string, time.Time, time.Duration) error {
	return errors.New("delivery store: write timed out")
}

// TestAProcessedDeliveryNotRecordedIsCountedAsSuch pins the count of a
// completion the delivery store did not take: the delivery was processed
// (200, counted processed), and is counted in
// webhook_deliveries_unrecorded_total, since its claim lapses and the
// same body is processed again rather than answered duplicate.
func TestAProcessedDeliveryNotRecordedIsCountedAsSuch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p := newPipeServer(t, withRun(t, gaterun.NewMemoryStore(), reg), func(c *server.Config) {
			c.Deliveries = unrecordingDeliveries{delivery.NewMemoryStore()}
		})
		defer p.stop()
		for i := 1; i <= 2; i++ {
			code, body := p.post(t, "/webhooks/github", deliveryHeaders("guid-unrecorded"), pullClosed)
			if code != http.StatusOK || body != `{"offered":1}` {
				t.Errorf("delivery %d: got %d %s, want 200 offered 1: a delivery whose record was not taken is processed again, not a duplicate", i, code, body)
			}
			time.Sleep(time.Minute) // the claim lapses
		}
		if got := deliveriesOutcome(t, reg, "processed"); got != 2 {
			t.Errorf("webhook_deliveries_total{outcome=\"processed\"}: got %v, want 2: it was processed both times", got)
		}
		if got := metricValue(t, p.srv.Handler(), "webhook_deliveries_unrecorded_total"); got != 2 {
			t.Errorf("webhook_deliveries_unrecorded_total: got %v, want 2: a processed delivery whose completion the store did not take is counted as such", got)
		}
	})
}

// pruningDeliveries is a delivery store that deletes its expired ids
// itself and counts the deletions that failed, as delivery.MongoStore
// does on a server without TTL indexes.
type pruningDeliveries struct {
	delivery.Store
	failed uint64
}

func (p pruningDeliveries) PruneFailures() uint64 { return p.failed }

// TestFailedDeliveryPrunesAreCounted pins that the delivery store's failed
// prunes of expired ids, which do not fail the claims that run them, reach
// /metrics as webhook_deliveries_prune_failures_total, for an operator to
// alert on if they wish.
func TestFailedDeliveryPrunesAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, func(c *server.Config) { c.Deliveries = pruningDeliveries{delivery.NewMemoryStore(), 3} })
		defer p.stop()
		if got := metricValue(t, p.srv.Handler(), "webhook_deliveries_prune_failures_total"); got != 3 {
			t.Errorf("webhook_deliveries_prune_failures_total: got %v, want 3: the store's failed prunes are exported", got)
		}
	})
}
