package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"unicode/utf8"

	"github.com/google/go-github/v88/github"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
)

// Request body limits: a run report is small; GitHub caps webhook payloads
// at 25 MB.
const (
	maxRunBody     = 1 << 20
	maxWebhookBody = 25 << 20
	// maxDescription is the longest status description GitHub accepts.
	maxDescription = 140
)

// Handler is the server's HTTP API:
//
//	POST /api/runs          record a run's verdict (bearer token) and offer it
//	POST /webhooks/github   pull_request and status events (X-Hub-Signature-256)
//	GET  /healthz           200, or 503 when an elected net's work is stuck
//	GET  /metrics           Prometheus
//	GET  /                  index: every page, this replica's owner and terms
//	GET  /leases            lease holders, HTML; ?format=json for JSON
//	GET  /runs              unsettled runs and their last offer here, HTML
//	GET  /api/runs          runs by repo, pull and state, paginated (bearer token)
//	GET  /api/runs/{id}     one run (bearer token)
//	GET  /board             the forge board's cards, HTML; ?format=json for JSON
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/runs", s.postRun)
	mux.HandleFunc("POST /webhooks/github", s.postWebhook)
	mux.HandleFunc("GET /healthz", s.getHealthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /leases", s.getLeases)
	mux.HandleFunc("GET /{$}", s.getIndex)
	mux.HandleFunc("GET /runs", s.getRunsPage)
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("GET /api/runs/{id}", s.getRun)
	mux.Handle("GET /board", board.Handler(s.cfg.Board, s.render))
	return mux
}

// writeJSON and writeError answer in the one JSON shape the board's view
// shares (internal/httpjson).
var (
	writeJSON  = httpjson.Write
	writeError = httpjson.Error
)

// runRequest is the body of POST /api/runs.
type runRequest struct {
	Repo        string `json:"repo"`
	Pull        int    `json:"pull"`
	HeadSHA     string `json:"head_sha"`
	Verdict     string `json:"verdict"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// decodeJSON decodes exactly one JSON value from r into v, with errors that
// name the field of a type mismatch.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return fmt.Errorf("%w: %s: got a JSON %s, want a JSON %s", ErrInvalid, te.Field, te.Value, jsonKind(te.Type))
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: malformed JSON: empty body", ErrInvalid)
		}
		return fmt.Errorf("%w: malformed JSON: %w", ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: malformed JSON: data after the object", ErrInvalid)
	}
	return nil
}

// run validates the request, naming the first bad field, and returns the
// run it reports.
func (q runRequest) run(host string) (GateRun, error) {
	switch {
	case q.Repo == "":
		return GateRun{}, fmt.Errorf("%w: repo is required", ErrInvalid)
	case q.Pull == 0:
		return GateRun{}, fmt.Errorf("%w: pull is required", ErrInvalid)
	case q.HeadSHA == "":
		return GateRun{}, fmt.Errorf("%w: head_sha is required", ErrInvalid)
	case q.Verdict == "":
		return GateRun{}, fmt.Errorf("%w: verdict is required", ErrInvalid)
	case utf8.RuneCountInString(q.Description) > maxDescription:
		return GateRun{}, fmt.Errorf("%w: description has %d characters, the forge keeps at most %d",
			ErrInvalid, utf8.RuneCountInString(q.Description), maxDescription)
	}
	if q.TargetURL != "" {
		u, err := url.Parse(q.TargetURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return GateRun{}, fmt.Errorf("%w: target_url %q is not an absolute http(s) URL", ErrInvalid, q.TargetURL)
		}
	}
	if q.Context == "" {
		q.Context = DefaultContext
	}
	run := GateRun{
		ID: RunID(host, q.Repo, q.Pull, q.HeadSHA), Host: host, Repo: q.Repo, Pull: q.Pull,
		HeadSHA: q.HeadSHA, Context: q.Context, Verdict: Verdict(q.Verdict),
		Description: q.Description, TargetURL: q.TargetURL,
	}
	return run, run.Validate()
}

// jsonKind names the JSON type that decodes into t ("number" for Go's int).
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// postRun is POST /api/runs: 401 without the bearer token; 400 naming the
// field for a body it cannot use (nothing stored); else it stores the run,
// offers it on lane api, and answers 201 (new) or 200 (same repo, pull and
// head again) with {"id": ...}.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var q runRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, maxRunBody), &q); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	run, err := q.run(s.cfg.ForgeHost)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	created, err := s.cfg.Runs.Put(r.Context(), run, s.cfg.Now())
	if err != nil {
		s.log.Error("run not stored", "run", run.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "run not stored; retry")
		return
	}
	s.log.Info("run recorded", "run", run.ID, "repo", run.Repo, "pull", run.Pull,
		"head", run.HeadSHA, "verdict", run.Verdict, "created", created)
	s.offerAll(r.Context(), forge.LaneAPI, []GateRun{run})
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, map[string]string{"id": run.ID})
}

// offerAll offers runs on lane within OfferTimeout, on a context that
// outlives the client's: an offer once started is finished. Failures are
// logged by the reconciler and left for the sweeper.
func (s *Server) offerAll(ctx context.Context, lane string, runs []GateRun) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OfferTimeout)
	defer cancel()
	for _, run := range runs {
		if _, err := s.offer(ctx, lane, run); errors.Is(err, forge.ErrRateLimited) {
			return // the rest would be refused too; the sweeper repairs them
		}
	}
}

// postWebhook is POST /webhooks/github: 404 when no secret is configured;
// 401 on a missing or wrong
// X-Hub-Signature-256; pull_request and status events offer the unsettled
// runs of the pull request or head on lane webhook (200 {"offered": n});
// other events are ignored with 202; a payload it cannot read is 400.
func (s *Server) postWebhook(w http.ResponseWriter, r *http.Request) {
	if s.cfg.WebhookSecret == "" {
		writeError(w, http.StatusNotFound, "webhooks are off: no webhook secret configured")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	sig := r.Header.Get(github.SHA256SignatureHeader)
	if sig == "" {
		writeError(w, http.StatusUnauthorized, "missing "+github.SHA256SignatureHeader)
		return
	}
	if err := github.ValidateSignature(sig, body, []byte(s.cfg.WebhookSecret)); err != nil {
		writeError(w, http.StatusUnauthorized, "wrong "+github.SHA256SignatureHeader)
		return
	}
	event := github.WebHookType(r)
	runs, err := s.affected(r.Context(), event, body)
	if errors.Is(err, errIgnored) {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": event})
		return
	}
	if errors.Is(err, ErrInvalid) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		s.log.Error("webhook: cannot list affected runs", "event", event, "err", err)
		writeError(w, http.StatusServiceUnavailable, "runs not read; redeliver")
		return
	}
	s.log.Debug("webhook", "event", event, "runs", len(runs))
	s.offerAll(r.Context(), forge.LaneWebhook, runs)
	writeJSON(w, http.StatusOK, map[string]int{"offered": len(runs)})
}

// errIgnored marks a webhook event the gate does not act on.
var errIgnored = errors.New("server: webhook event ignored")

// affected returns the unsettled runs a webhook event concerns.
func (s *Server) affected(ctx context.Context, event string, body []byte) ([]GateRun, error) {
	if event != "pull_request" && event != "status" {
		return nil, errIgnored
	}
	payload, err := github.ParseWebHook(event, body)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed %s payload: %w", ErrInvalid, event, err)
	}
	switch ev := payload.(type) {
	case *github.PullRequestEvent:
		repo, number := ev.GetRepo().GetFullName(), ev.GetPullRequest().GetNumber()
		if number == 0 {
			number = ev.GetNumber()
		}
		if repo == "" || number == 0 {
			return nil, fmt.Errorf("%w: pull_request payload: repository.full_name %q or pull_request.number %d missing", ErrInvalid, repo, number)
		}
		return s.cfg.Runs.ForPull(ctx, s.cfg.ForgeHost, repo, number)
	case *github.StatusEvent:
		repo, sha := ev.GetRepo().GetFullName(), ev.GetSHA()
		if repo == "" || sha == "" {
			return nil, fmt.Errorf("%w: status payload: repository.full_name %q or sha %q missing", ErrInvalid, repo, sha)
		}
		return s.cfg.Runs.ForHead(ctx, s.cfg.ForgeHost, repo, sha)
	}
	return nil, errIgnored
}

// getHealthz is GET /healthz: 200 {"status": "ok"}, or 503 with the lease
// health error when an elected net's work outlived its term.
func (s *Server) getHealthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.health.Check(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "owner": s.cfg.Owner, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "owner": s.cfg.Owner})
}
