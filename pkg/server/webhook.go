package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"

	"iterion.dev/iterion/pkg/delivery"
	"iterion.dev/iterion/pkg/gaterun"
)

// Webhook reading: GitHub signs the body with HMAC-SHA256 of the webhook
// secret, hex-encoded after "sha256=" in X-Hub-Signature-256
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
// The legacy X-Hub-Signature (HMAC-SHA1) is never accepted, in either header.
const (
	signaturePrefix = "sha256="
	// deliveryHeader is the GUID of one delivery; a redelivery keeps it
	// (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers).
	deliveryHeader = "X-GitHub-Delivery"
	// maxDeliveryID bounds an X-GitHub-Delivery, which is logged and
	// quoted in a duplicate's answer; GitHub's are GUIDs of 36 characters.
	maxDeliveryID = 100
	// smallWebhookBody is the largest body read into memory while its
	// signature is checked; a larger one (or one of unknown length) streams
	// through the HMAC into a temporary file, under Limits.LargeWebhookReads.
	smallWebhookBody = 1 << 20
)

var (
	// errBadSignature: the body does not match X-Hub-Signature-256.
	errBadSignature = errors.New("server: webhook signature does not match")
	// errBusy: every large-read slot is taken, or the remote address
	// already holds its share of them.
	errBusy = errors.New("server: too many large webhook bodies in flight")
	// errTooSlow: a large body fell behind Limits.MinWebhookBodyRate.
	errTooSlow = errors.New("server: webhook body arrives too slowly")
)

// postWebhook is POST /webhooks/github: 404 when no secret is configured;
// 401 on a missing X-Hub-Signature-256 or one not of the form
// sha256=<64 hex digits>, and 400 on a missing X-GitHub-Delivery or one
// over maxDeliveryID bytes, before
// any of the body is read; 413 for a body over GitHub's 25 MB cap; 415 for
// a Content-Type other than application/json or
// application/x-www-form-urlencoded (whose payload parameter is the JSON
// payload); 401 when the body does not match the signature;
// 503 with Retry-After when too many large bodies are in flight or the
// stores do not answer within StoreTimeout. Each answer up to the
// signature's check, which may come before the body was read to its end,
// closes the connection, and is sent without waiting for the rest of it. In App mode, appWebhook answers
// the installation events (claimed, deduplicated and answered as below;
// what one says is gone is checked with GitHub first) and an event of an
// unknown installation.
// With the board, an issues event deleting or transferring an issue of a
// board repository removes its card (issuesWebhook), deduplicated and
// answered as below. Other events than pull_request and status, and other
// issues events, are ignored with 202. A payload it
// cannot read is 400, before the delivery is claimed. A delivery whose
// body was processed within DeliveryWindow, on any replica sharing
// Deliveries, is acknowledged with 200 {"duplicate": id} (its
// X-GitHub-Delivery) and not processed again, whatever its id; one being
// processed under an earlier claim answers 503 with Retry-After. Else the
// unsettled runs of the pull request or head are offered on lane webhook
// (200 {"offered": n}) and the delivery is recorded as processed. The
// answer comes within WebhookAnswerWithin of the request's headers: a
// claim not answered by then is 503, and a claimed delivery still being
// processed then is answered 202 {"processing": id} while its processing
// goes on (processDelivery). A delivery that was not processed (400, 503,
// a lost answer, a failure after its 202) is never recorded as processed:
// its claim lapses after claimHold, and its redelivery is processed.
func (s *Server) postWebhook(w http.ResponseWriter, r *http.Request) {
	answerBy := time.Now().Add(s.cfg.WebhookAnswerWithin)
	// Until the body is read to its end, an answer closes the connection:
	// else net/http reads up to 256 KiB more of a body it will not use
	// before it sends the answer, and a body still arriving (chunked, or
	// trickling) had its refusal wait for that or for the read timeout.
	w.Header().Set("Connection", "close")
	if s.cfg.WebhookSecret == "" {
		writeError(w, http.StatusNotFound, "webhooks are off: no webhook secret configured")
		return
	}
	want, err := parseSignature(r.Header.Get(github.SHA256SignatureHeader))
	if err != nil {
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	deliveryID := r.Header.Get(deliveryHeader)
	if deliveryID == "" {
		// GitHub always sends it; it names the delivery in the logs
		// and in a duplicate's answer.
		writeError(w, http.StatusBadRequest, "missing "+deliveryHeader)
		return
	}
	if len(deliveryID) > maxDeliveryID {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s has %d bytes, want a GitHub GUID, at most %d", deliveryHeader, len(deliveryID), maxDeliveryID))
		return
	}
	if r.ContentLength > MaxWebhookBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over GitHub's cap of %d bytes", MaxWebhookBodyBytes))
		return
	}
	form, err := webhookContentType(r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	body, err := s.readSigned(w, r, want)
	if err != nil {
		s.refuseBody(w, err)
		return
	}
	w.Header().Del("Connection")
	key := replayKey(body)
	if form {
		if body, err = formPayload(body); err != nil {
			s.deliveries.WithLabelValues(deliveryInvalid).Inc()
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	event := github.WebHookType(r)
	if s.cfg.App != nil && s.appWebhook(w, r, event, body, key, deliveryID, answerBy) {
		return
	}
	if event == "issues" {
		s.issuesWebhook(w, r, key, deliveryID, body, answerBy)
		return
	}
	if event != "pull_request" && event != "status" {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": event})
		return
	}
	// The payload is read before the claim, so a 400 is found in time
	// whatever the stores and the forge take afterwards.
	q, err := parseTarget(event, body)
	if err != nil {
		s.deliveries.WithLabelValues(deliveryInvalid).Inc()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.claimAndProcess(w, r, key, deliveryID, event, answerBy, func() deliveryAnswer { return s.runDelivery(key, deliveryID, q) })
}

// claimAndProcess claims delivery deliveryID of event under key (claim,
// answered by answerBy) and, when it has the claim, processes it by run
// (processDelivery); either way w is answered.
func (s *Server) claimAndProcess(w http.ResponseWriter, r *http.Request, key, deliveryID, event string, answerBy time.Time, run func() deliveryAnswer) {
	ctx, cancel := context.WithDeadline(r.Context(), answerBy)
	claimed := s.claim(w, r.WithContext(ctx), key, deliveryID, event)
	cancel()
	if claimed {
		s.processDelivery(w, deliveryID, event, answerBy, run)
	}
}

// replayKey is the key a delivery is claimed and remembered under: the
// SHA-256 of its body as sent. X-GitHub-Delivery is not signed, so keyed
// on it, a body captured once (from a proxy's log, or from the webhook's
// Recent Deliveries, which a repository's admins see) would be processed
// again under every fresh id it is sent with; the body is signed, and
// GitHub redelivers a delivery with the same body and id
// (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks).
func replayKey(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// claim claims key (replayKey) for processing and reports whether the
// caller has it; when not, it has answered: 503 with Retry-After when the
// store does not answer (within StoreTimeout or r's deadline) or an
// earlier claim is being processed, 200 {"duplicate": deliveryID} when it
// was processed.
func (s *Server) claim(w http.ResponseWriter, r *http.Request, key, deliveryID, event string) bool {
	ctx, cancel := s.storeCtx(r)
	claim, err := s.cfg.Deliveries.Claim(ctx, key, s.cfg.Now(), s.claimHold())
	cancel()
	switch {
	case err != nil:
		// The claim may have landed: it lapses at its hold's end.
		s.log.Error("webhook: delivery not claimed", "delivery", deliveryID, "key", key, "err", err)
		s.deliveries.WithLabelValues(deliveryUnavailable).Inc()
		s.retryAfter(w, s.claimHold(), "delivery not claimed; redeliver")
		return false
	case claim == delivery.Held:
		s.log.Info("webhook: delivery being processed by an earlier claim", "delivery", deliveryID, "key", key, "event", event)
		s.deliveries.WithLabelValues(deliveryHeld).Inc()
		s.retryAfter(w, s.claimHold(), "delivery being processed; redeliver if it is not acknowledged")
		return false
	case claim == delivery.Done:
		s.log.Info("webhook: delivery seen before, not processed again", "delivery", deliveryID, "key", key, "event", event)
		s.deliveries.WithLabelValues(deliveryDuplicate).Inc()
		writeJSON(w, http.StatusOK, map[string]string{"duplicate": deliveryID})
		return false
	}
	return true
}

// claimHold is how long a webhook's delivery claim holds before it lapses:
// the longest processing of a claimed delivery, each step at its bound,
// whether the delivery was answered before they ended (processDelivery)
// or after (claimHoldOf).
func (s *Server) claimHold() time.Duration {
	return claimHoldOf(s.cfg.StoreTimeout, s.cfg.OfferTimeout)
}

// claimHoldOf is the claim's hold for a store timeout and an offer
// timeout. The longest processing is an App's pull_request or status
// event whose offers end, at the offer timeout, in a read GitHub refuses
// with the token of an installation it suspended (the suspend webhook
// lost): the claim's own answer, the runs lookup, the offers, GitHub's
// check of the installation (offerAll's checkRefused, an offer timeout of
// its own), the two news leases telling the other replicas it is gone and
// suspended, and the completion: five store calls and two offer timeouts.
// An installation_repositories event's (the claim, GitHub's check, a news
// lease, the runs moved, the completion) is a store call and an offer
// timeout shorter. The claim is stamped before it is sent, so a hold
// short of any of them can lapse while the delivery is still being
// processed, and a redelivery then be processed beside it.
func claimHoldOf(storeTimeout, offerTimeout time.Duration) time.Duration {
	return 5*storeTimeout + 2*offerTimeout
}

// complete records processed delivery deliveryID under key, on its own
// bounded context (the request may have been answered). When it fails,
// the delivery still counts as processed (it was), is counted in
// webhook_deliveries_unrecorded_total and logged, and its claim lapses:
// a redelivery is processed again, which offers' idempotence makes
// harmless.
func (s *Server) complete(key, deliveryID string) {
	ctx, cancel := context.WithTimeout(s.work.ctx, s.cfg.StoreTimeout)
	defer cancel()
	if err := s.cfg.Deliveries.Complete(ctx, key, s.cfg.Now(), s.cfg.DeliveryWindow); err != nil {
		s.unrecorded.Inc()
		s.log.Warn("webhook: delivery processed but not recorded; a redelivery will be processed again", "delivery", deliveryID, "key", key, "err", err)
	}
}

// The content types a webhook is delivered in: "application/json delivers
// the JSON payload directly as the body of the POST request";
// "application/x-www-form-urlencoded sends the JSON payload as a form
// parameter called payload", a repository webhook's default (Creating
// webhooks, Content type:
// https://docs.github.com/en/webhooks/using-webhooks/creating-webhooks#creating-a-repository-webhook).
// Either way GitHub signs the body as sent
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries),
// so the signature is checked over the raw form before it is decoded.
const (
	contentJSON = "application/json"
	contentForm = "application/x-www-form-urlencoded"
)

// webhookContentType tells a form-encoded delivery (form true) from a JSON
// one; no Content-Type at all is read as JSON. Any other type is an error
// naming the accepted ones.
func webhookContentType(header string) (form bool, err error) {
	if header == "" {
		return false, nil
	}
	mt, _, err := mime.ParseMediaType(header)
	switch {
	case err == nil && mt == contentJSON:
		return false, nil
	case err == nil && mt == contentForm:
		return true, nil
	}
	return false, fmt.Errorf("content type %q: want %s or %s", clip(header), contentJSON, contentForm)
}

// formPayload returns the JSON payload of a form-encoded body: its payload
// parameter.
func formPayload(body []byte) ([]byte, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%s body: %w", contentForm, err)
	}
	if !v.Has("payload") {
		return nil, fmt.Errorf("%s body: no payload parameter", contentForm)
	}
	return []byte(v.Get("payload")), nil
}

// parseSignature returns the MAC an X-Hub-Signature-256 value carries, or
// an error naming the header when it is not sha256=<64 hex digits>.
func parseSignature(header string) ([]byte, error) {
	if header == "" {
		return nil, fmt.Errorf("missing %s", github.SHA256SignatureHeader)
	}
	hexMAC, ok := strings.CutPrefix(header, signaturePrefix)
	mac, err := hex.DecodeString(hexMAC)
	if !ok || err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("%s: want sha256=<64 hex digits>", github.SHA256SignatureHeader)
	}
	return mac, nil
}

// readSigned reads r's body, at most MaxWebhookBodyBytes, through an
// HMAC-SHA256 of the webhook secret and returns it when it matches want.
// A body over smallWebhookBody (or of unknown length) takes a large-read
// slot (takeLargeSlot; errBusy when it gets none), must arrive at
// Limits.MinWebhookBodyRate (errTooSlow when it falls behind), and is
// spooled to a temporary file, so an unsigned large body costs disk for a
// moment, never memory.
func (s *Server) readSigned(w http.ResponseWriter, r *http.Request, want []byte) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, MaxWebhookBodyBytes)
	mac := hmac.New(sha256.New, []byte(s.cfg.WebhookSecret))
	if r.ContentLength >= 0 && r.ContentLength <= smallWebhookBody {
		b, err := io.ReadAll(io.TeeReader(body, mac))
		if err != nil {
			return nil, err
		}
		if !hmac.Equal(mac.Sum(nil), want) {
			return nil, errBadSignature
		}
		return b, nil
	}
	release, err := s.takeLargeSlot(r)
	if err != nil {
		return nil, err
	}
	defer release()
	paced := &minRateReader{r: body, rc: http.NewResponseController(w), start: time.Now(),
		rate: s.cfg.Limits.MinWebhookBodyRate, grace: s.cfg.Limits.SlowBodyGrace}
	f, err := os.CreateTemp("", "iterion-webhook-*")
	if err != nil {
		return nil, fmt.Errorf("%w: spool: %w", errBusy, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(io.MultiWriter(f, mac), paced); err != nil {
		return nil, err
	}
	if !hmac.Equal(mac.Sum(nil), want) {
		return nil, errBadSignature
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%w: spool: %w", errBusy, err)
	}
	return io.ReadAll(f) // signed by GitHub, at most 25 MB
}

// takeLargeSlot takes a large-read slot for r and returns its release.
// Slots are shared by remote address: an address holding
// Limits.LargeWebhookReadsPerAddress of them gets errBusy at once, so a
// client without the secret holds at most that many, whatever number of
// connections it opens; an address holding fewer waits up to
// Limits.SlowBodyGrace for a slot, which a slow body frees within about as
// long (minRateReader), before errBusy.
func (s *Server) takeLargeSlot(r *http.Request) (release func(), err error) {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	s.largeMu.Lock()
	if held := s.largeBy[addr]; held >= s.cfg.Limits.LargeWebhookReadsPerAddress {
		s.largeMu.Unlock()
		return nil, fmt.Errorf("%w: %s is sending %d already", errBusy, addr, held)
	}
	s.largeBy[addr]++
	s.largeMu.Unlock()
	drop := func() {
		s.largeMu.Lock()
		if s.largeBy[addr]--; s.largeBy[addr] == 0 {
			delete(s.largeBy, addr)
		}
		s.largeMu.Unlock()
	}
	t := time.NewTimer(s.cfg.Limits.SlowBodyGrace)
	defer t.Stop()
	select {
	case s.largeReads <- struct{}{}:
		return func() { <-s.largeReads; drop() }, nil
	case <-t.C:
	case <-r.Context().Done():
	}
	drop()
	return nil, errBusy
}

// minRateReader reads a large webhook body and cuts it off (errTooSlow)
// when it falls behind rate: the bytes read so far and the next buffer
// must have arrived grace plus their size at rate after start. It moves
// the connection's read deadline before each read, so a client that sends
// nothing at all is cut off too.
type minRateReader struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	n     int64
	rate  int64
	grace time.Duration
}

func (m *minRateReader) Read(p []byte) (int, error) {
	due := m.start.Add(m.grace + time.Duration(float64(m.n+int64(len(p)))/float64(m.rate)*float64(time.Second)))
	// An error means the connection has no deadlines (HTTP/2 without
	// support, a test recorder): ReadTimeout still bounds the read.
	_ = m.rc.SetReadDeadline(due)
	n, err := m.r.Read(p)
	m.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: %d bytes in %v, want at least %d bytes/s after %v", errTooSlow, m.n, time.Since(m.start).Round(time.Millisecond), m.rate, m.grace)
	}
	return n, err
}

// refuseBody answers a webhook body readSigned did not return.
func (s *Server) refuseBody(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBadSignature):
		writeError(w, http.StatusUnauthorized, "wrong "+github.SHA256SignatureHeader)
	case errors.Is(err, errBusy):
		s.log.Warn("webhook: body not read", "err", err)
		s.unavailable(w, "too many large webhook bodies in flight; redeliver")
	case errors.Is(err, errTooSlow):
		s.log.Warn("webhook: body cut off", "err", err)
		writeError(w, http.StatusRequestTimeout, err.Error())
	default:
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over GitHub's cap of %d bytes", MaxWebhookBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
	}
}

// webhookTarget is what a pull_request or status event concerns: a pull
// request (pull), or a head (sha), of repo.
type webhookTarget struct {
	event string
	repo  string
	pull  int
	sha   string
}

// parseTarget reads what a pull_request or status payload concerns; an
// error wraps errInvalid and names the missing field.
func parseTarget(event string, body []byte) (webhookTarget, error) {
	payload, err := github.ParseWebHook(event, body)
	if err != nil {
		return webhookTarget{}, fmt.Errorf("%w: malformed %s payload: %w", errInvalid, event, err)
	}
	switch ev := payload.(type) {
	case *github.PullRequestEvent:
		repo, number := ev.GetRepo().GetFullName(), ev.GetPullRequest().GetNumber()
		if number == 0 {
			number = ev.GetNumber()
		}
		if repo == "" || number == 0 {
			return webhookTarget{}, fmt.Errorf("%w: pull_request payload: repository.full_name %q or pull_request.number %d missing", errInvalid, clip(repo), number)
		}
		return webhookTarget{event: event, repo: repo, pull: number}, nil
	case *github.StatusEvent:
		repo, sha := ev.GetRepo().GetFullName(), ev.GetSHA()
		if repo == "" || sha == "" {
			return webhookTarget{}, fmt.Errorf("%w: status payload: repository.full_name %q or sha %q missing", errInvalid, clip(repo), clip(sha))
		}
		return webhookTarget{event: event, repo: repo, sha: strings.ToLower(sha)}, nil
	}
	return webhookTarget{}, fmt.Errorf("%w: %s payload parsed as %T", errInvalid, event, payload)
}

// affected returns the unsettled runs q concerns.
func (s *Server) affected(ctx context.Context, q webhookTarget) ([]gaterun.Run, error) {
	if q.sha != "" {
		return s.cfg.Runs.ForHead(ctx, s.cfg.ForgeHost, q.repo, q.sha)
	}
	return s.cfg.Runs.ForPull(ctx, s.cfg.ForgeHost, q.repo, q.pull)
}
