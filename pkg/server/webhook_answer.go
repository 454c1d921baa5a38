// A webhook's answer within GitHub's timeout: a claimed delivery is
// processed on its own goroutine, answered with its outcome when that comes
// in time and 202 when it does not, and tracked until its processing ends.

package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/forge"
)

// GitHubWebhookTimeout is how long GitHub waits for a webhook delivery's
// answer: "Your server should respond with a 2XX response within 10
// seconds of receiving a webhook delivery", after which GitHub closes the
// connection and records the delivery as failed
// (https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks#respond-within-10-seconds),
// and it does not redeliver it on its own
// (https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries).
// GitHub Enterprise Server waits 30 s; the bound holds there too.
const GitHubWebhookTimeout = 10 * time.Second

// DefaultWebhookAnswerWithin is Config.WebhookAnswerWithin's default: 2 s
// under GitHubWebhookTimeout, for the network between GitHub and the
// handler, a proxy in between, and writing the answer.
const DefaultWebhookAnswerWithin = 8 * time.Second

// The outcomes of webhook_deliveries_total. A delivery counts once at its
// answer (the first six); one answered before its processing ended counts
// once more when it ends (the last two).
const (
	deliveryProcessed   = "processed"   // processed, then answered 200 (offered, removed; applied or not_applied)
	deliveryDuplicate   = "duplicate"   // processed before: 200 duplicate
	deliveryHeld        = "held"        // an earlier claim holds it: 503
	deliveryInvalid     = "invalid"     // a payload or id it cannot use: 400
	deliveryUnavailable = "unavailable" // a store (or, for an installation event, GitHub) did not answer in time: 503
	// deliveryAnsweredEarly: answered 202 at WebhookAnswerWithin, its
	// processing going on.
	deliveryAnsweredEarly = "answered_before_processed"
	// deliveryProcessedLate: answered early, then processed.
	deliveryProcessedLate = "processed_after_answer"
	// deliveryFailedLate: answered early, then not processed (the runs not
	// read, the card not removed, or the server shutting down): GitHub's
	// log says delivered.
	deliveryFailedLate = "failed_after_answer"
)

// newDeliveryOutcomes returns webhook_deliveries_total, every outcome's
// series present from the start, so a rate over one is 0, not absent.
func newDeliveryOutcomes() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_deliveries_total",
		Help: "Webhook deliveries of pull_request and status events, of issues events that take a board card away, and, in App mode, of installation and installation_repositories events, by outcome: each counts once when it is answered " +
			"(processed, duplicate, held, invalid, unavailable, or answered_before_processed: answered 202 at --webhook-answer-within while still processing), " +
			"and an answered_before_processed one once more when its processing ends (processed_after_answer, or failed_after_answer: not processed, though GitHub's log says delivered).",
	}, []string{"outcome"})
	for _, o := range deliveryOutcomes {
		c.WithLabelValues(o)
	}
	return c
}

// deliveryOutcomes are the outcomes webhook_deliveries_total counts, each
// series from the start.
var deliveryOutcomes = []string{deliveryProcessed, deliveryDuplicate, deliveryHeld, deliveryInvalid, deliveryUnavailable,
	deliveryAnsweredEarly, deliveryProcessedLate, deliveryFailedLate}

// newDeliveriesUnrecorded returns webhook_deliveries_unrecorded_total.
func newDeliveriesUnrecorded() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "webhook_deliveries_unrecorded_total",
		Help: "Webhook deliveries processed (counted processed or processed_after_answer in webhook_deliveries_total) whose record the delivery store did not take within --store-timeout: " +
			"their claims lapse, so the same body, redelivered or sent again within --delivery-window, is processed again rather than answered duplicate.",
	})
}

// newDeliveryPruneFailures returns webhook_deliveries_prune_failures_total,
// read from store when it deletes its expired ids itself
// (delivery.MongoStore, on a server without TTL indexes), else 0.
func newDeliveryPruneFailures(store delivery.Store) prometheus.CounterFunc {
	pruner, _ := store.(interface{ PruneFailures() uint64 })
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "webhook_deliveries_prune_failures_total",
		Help: "Failed deletions of expired webhook delivery ids by the delivery store itself, which deletes them every few hundred claims on a server without TTL indexes (FerretDB, dev-mongo): " +
			"the claim that ran one keeps its answer, and the deletion is tried again a few claims later (each failure is logged). Always 0 on MongoDB, whose TTL index deletes them.",
	}, func() float64 {
		if pruner == nil {
			return 0
		}
		return float64(pruner.PruneFailures())
	})
}

// deliveryWork is the processing of claimed webhook deliveries, detached
// from their requests so it outlives an early answer. Safe for concurrent
// use.
type deliveryWork struct {
	// ctx is the base of every store call and offer of the processing;
	// cancel ends what is left of it when Run stops waiting (drain).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newDeliveryWork() *deliveryWork {
	ctx, cancel := context.WithCancel(context.Background())
	return &deliveryWork{ctx: ctx, cancel: cancel}
}

// drain waits for the deliveries being processed until ctx is done, then
// cancels the rest and waits for them to end: each is bounded by the
// claim's hold anyway, and one cancelled is not recorded as processed, so
// its claim lapses and its redelivery is processed.
func (d *deliveryWork) drain(ctx context.Context, log *slog.Logger) {
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	log.Warn("shutting down: webhook deliveries still being processed at the shutdown timeout are cancelled; their claims lapse, redeliver them (webhook_deliveries_total{outcome=\"failed_after_answer\"})")
	d.cancel()
	<-done
}

// deliveryAnswer is what processing a claimed delivery says: write answers
// its request, outcome is counted, and processed tells whether it was
// processed (its runs offered, or its card removed) and recorded so.
type deliveryAnswer struct {
	write     func(http.ResponseWriter)
	outcome   string
	processed bool
}

// deliveryJob hands a delivery's answer from its processing to its
// request, or tells the processing that the request was answered first.
type deliveryJob struct {
	mu       sync.Mutex
	answered bool                // the request was answered before processing ended
	answer   chan deliveryAnswer // buffered: the processing never waits on it
}

// processDelivery processes claimed delivery id of event by run (for a
// pull_request or status event runDelivery, for an issues event
// removeCard, in App mode for an installation or installation_repositories
// event installationEvent or installationRepositoriesEvent) on the
// detached goroutines of s.work, and answers w with the
// outcome when it comes by answerBy; else it answers 202 {"processing": id}
// at answerBy and the processing goes on, its end logged and counted.
func (s *Server) processDelivery(w http.ResponseWriter, id, event string, answerBy time.Time, run func() deliveryAnswer) {
	job := &deliveryJob{answer: make(chan deliveryAnswer, 1)}
	s.work.wg.Go(func() {
		a := run()
		job.mu.Lock()
		late := job.answered
		if !late {
			job.answer <- a
		}
		job.mu.Unlock()
		if late {
			s.endedAfterAnswer(id, event, a)
		}
	})
	t := time.NewTimer(time.Until(answerBy))
	defer t.Stop()
	var a deliveryAnswer
	select {
	case a = <-job.answer:
	case <-t.C:
		job.mu.Lock()
		select {
		case a = <-job.answer: // it ended as the deadline came
		default:
			job.answered = true
		}
		job.mu.Unlock()
	}
	if a.write == nil {
		s.log.Info("webhook: delivery answered before its processing ended", "delivery", id, "event", event)
		s.deliveries.WithLabelValues(deliveryAnsweredEarly).Inc()
		writeJSON(w, http.StatusAccepted, map[string]string{"processing": id})
		return
	}
	s.deliveries.WithLabelValues(a.outcome).Inc()
	a.write(w)
}

// runDelivery processes delivery id, claimed under key, on s.work's context, each
// step bounded as the claim's hold counts it: the runs lookup by
// StoreTimeout, the offers by OfferTimeout, the completion by
// StoreTimeout. The delivery is recorded as processed only when its runs
// were offered to the end; otherwise its claim lapses.
func (s *Server) runDelivery(key, id string, q webhookTarget) deliveryAnswer {
	ctx, cancel := context.WithTimeout(s.work.ctx, s.cfg.StoreTimeout)
	runs, err := s.affected(ctx, q)
	cancel()
	if err != nil {
		s.log.Error("webhook: cannot list affected runs", "event", q.event, "delivery", id, "err", err)
		return deliveryAnswer{outcome: deliveryUnavailable,
			write: func(w http.ResponseWriter) { s.unavailable(w, "runs not read; redeliver") }}
	}
	s.log.Debug("webhook", "event", q.event, "delivery", id, "runs", len(runs))
	s.offerAll(s.work.ctx, forge.LaneWebhook, runs)
	if a, stopped := s.shuttingDown(q.event, id); stopped {
		// Some runs may not have been offered.
		return a
	}
	s.complete(key, id)
	return deliveryAnswer{outcome: deliveryProcessed, processed: true,
		write: func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, map[string]int{"offered": len(runs)}) }}
}

// shuttingDown reports, once s.work's context has ended (the server
// stopped waiting at shutdown), that delivery deliveryID of event was not
// processed to the end (its runs not all offered; an installation event
// not told to the other replicas, or its runs not moved), with the 503
// answering it: it is not recorded, and its claim lapses.
func (s *Server) shuttingDown(event, deliveryID string) (deliveryAnswer, bool) {
	err := s.work.ctx.Err()
	if err == nil {
		return deliveryAnswer{}, false
	}
	s.log.Warn("webhook: delivery's processing cancelled at shutdown", "event", event, "delivery", deliveryID, "err", err)
	return deliveryAnswer{outcome: deliveryUnavailable,
		write: func(w http.ResponseWriter) { s.unavailable(w, "shutting down; redeliver") }}, true
}

// endedAfterAnswer logs and counts the end of the processing of delivery
// id of event, answered 202 before a ended it.
func (s *Server) endedAfterAnswer(id, event string, a deliveryAnswer) {
	if a.processed {
		s.deliveries.WithLabelValues(deliveryProcessedLate).Inc()
		s.log.Info("webhook: delivery processed after its answer", "delivery", id, "event", event)
		return
	}
	s.deliveries.WithLabelValues(deliveryFailedLate).Inc()
	s.log.Error("webhook: delivery answered 202 but not processed; GitHub's log shows it delivered: redeliver it once its claim lapses",
		"delivery", id, "event", event, "claim_lapses_within", s.claimHold())
}
