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
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/pkg/board"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// Bounds of a run report's fields, GitHub's where it has one.
const (
	// maxDescription is the longest commit status description GitHub
	// accepts: longer answers 422 "description is too long (maximum is 140
	// characters)" (https://docs.github.com/en/rest/commits/statuses#create-a-commit-status).
	maxDescription = 140
	// maxContext bounds a status context, in characters.
	maxContext = 255
	// maxTargetURL bounds a status target URL, in bytes.
	maxTargetURL = 2048
)

// Handler is the server's HTTP API:
//
//	POST /api/runs          record a run's verdict (bearer token) and offer it
//	POST /webhooks/github   pull_request and status events (X-Hub-Signature-256)
//	GET  /healthz           liveness: 200, or 503 when an elected net's work or pass is stuck
//	GET  /readyz            readiness: 200, or 503 while the stores do not answer
//	GET  /metrics           Prometheus
//	GET  /                  index: every page, this replica's owner and terms (page token)
//	GET  /leases            lease holders, HTML; ?format=json for JSON (page token)
//	GET  /runs              unsettled runs and their last offer here, HTML (page token)
//	GET  /api/runs          runs by repo, pull and state, paginated (bearer token)
//	GET  /api/runs/{id}     one run (bearer token)
//	GET  /board             the forge board's cards, HTML; ?format=json for JSON (page token)
//	GET  /installations     the App's installations: shard, holder, last pass, budgets, open runs, HTML (page token)
//	GET  /api/installations the same as JSON, paginated (page token); 404 without an App
//
// A page token is PagesToken or APIToken, sent as a bearer token or as the
// password of basic auth (any user name), never a cookie; without one a
// page answers 401, unless PublicPages. /healthz and /metrics need none.
// With AllowedHosts, a request whose Host is not listed answers 421,
// the probes excepted (checkHost).
func (s *Server) Handler() http.Handler { return s.handler }

// ProbeHandler serves GET /healthz, /readyz and /metrics alone, as
// Handler does, whatever the request's Host, and 404 for any other path:
// for a listener of its own (RunWithProbes, iterion serve --probe-addr)
// that the kubelet and Prometheus reach and the Service does not.
func (s *Server) ProbeHandler() http.Handler { return s.probes }

func (s *Server) probeRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.getHealthz)
	mux.HandleFunc("GET /readyz", s.getReadyz)
	mux.Handle("GET /metrics", s.metrics())
	return mux
}

// metrics is GET /metrics: the Registry, in Prometheus's format.
func (s *Server) metrics() http.Handler {
	return promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/runs", s.postRun)
	mux.HandleFunc("POST /webhooks/github", s.postWebhook)
	mux.HandleFunc("GET /healthz", s.getHealthz)
	mux.HandleFunc("GET /readyz", s.getReadyz)
	mux.Handle("GET /metrics", s.metrics())
	mux.Handle("GET /leases", s.page(http.HandlerFunc(s.getLeases)))
	mux.Handle("GET /{$}", s.page(http.HandlerFunc(s.getIndex)))
	mux.Handle("GET /runs", s.page(http.HandlerFunc(s.getRunsPage)))
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("GET /api/runs/{id}", s.getRun)
	mux.Handle("GET /board", s.page(s.storeDeadline(board.Handler(s.boardCards(), s.render, s.boardStatus))))
	mux.Handle("GET /installations", s.page(http.HandlerFunc(s.getInstallationsPage)))
	mux.Handle("GET /api/installations", s.page(http.HandlerFunc(s.getInstallationsJSON)))
	return mux
}

// boardCards is the board store GET /board reads, logging a read that
// fails (the page's 503 does not quote it); nil without a board.
func (s *Server) boardCards() board.Store {
	if s.cfg.Board == nil {
		return nil
	}
	return loggedCards{s.cfg.Board, s}
}

// loggedCards is a board store whose failed Cards are logged as
// storeFailed logs.
type loggedCards struct {
	board.Store
	s *Server
}

func (c loggedCards) Cards(ctx context.Context, q board.Query) ([]board.Card, error) {
	cards, err := c.Store.Cards(ctx, q)
	switch {
	case errors.Is(err, board.ErrMalformed):
		c.s.log.Error("stored document malformed; repair or delete it", "what", "board not read", "err", err)
	case err != nil:
		c.s.log.Warn("store did not answer", "what", "board not read", "err", err)
	}
	return cards, err
}

// writeJSON and writeError answer in the one JSON shape the board's view
// shares (internal/httpjson).
var (
	writeJSON  = httpjson.Write
	writeError = httpjson.Error
)

// errInvalid reports a request field, query parameter or webhook payload
// the server cannot use; errors that wrap it name the field and value, and
// the API answers them 400.
var errInvalid = errors.New("server: invalid")

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

// decodeJSON decodes exactly one JSON object from r into v, a pointer to a
// struct, with errors that name the field of a type mismatch, and refuses
// a field v does not have, naming it and the fields v has. Its one caller,
// POST /api/runs, defines every field of its body: a misspelt optional
// field ("targetUrl") would otherwise be dropped in silence and the run
// stored without it. Bodies whose fields another party adds to, GitHub's
// webhook payloads, are not read with it.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return fmt.Errorf("%w: %s: got a JSON %s, want a JSON %s", errInvalid, te.Field, clip(te.Value), jsonKind(te.Type))
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: malformed JSON: empty body", errInvalid)
		}
		if name, ok := httpjson.UnknownField(err); ok {
			return fmt.Errorf("%w: unknown field %q%s; the fields are %s", errInvalid, clip(name), httpjson.DidYouMean(name, jsonFields(v)), strings.Join(jsonFields(v), ", "))
		}
		return fmt.Errorf("%w: malformed JSON: %w", errInvalid, err)
	}
	if !httpjson.AtEnd(dec) {
		return fmt.Errorf("%w: malformed JSON: data after the object", errInvalid)
	}
	return nil
}

// run validates the request to GitHub's rules, naming the first bad field
// and its value, and returns the run it reports. A head SHA is stored in
// lower case, as GitHub writes it.
func (q runRequest) run(host string) (gaterun.Run, error) {
	if q.Repo == "" {
		return gaterun.Run{}, fmt.Errorf("%w: repo is required", errInvalid)
	}
	if _, _, err := forge.ParseRepo(q.Repo); err != nil {
		return gaterun.Run{}, fmt.Errorf("%w: repo: %w", errInvalid, err)
	}
	switch {
	case q.Pull == 0:
		return gaterun.Run{}, fmt.Errorf("%w: pull is required", errInvalid)
	case q.Pull < 0:
		return gaterun.Run{}, fmt.Errorf("%w: pull %d: want a positive integer", errInvalid, q.Pull)
	case q.HeadSHA == "":
		return gaterun.Run{}, fmt.Errorf("%w: head_sha is required", errInvalid)
	case !isCommitSHA(q.HeadSHA):
		return gaterun.Run{}, fmt.Errorf("%w: head_sha %q: want 40 or 64 hex digits", errInvalid, clip(q.HeadSHA))
	case q.Verdict == "":
		return gaterun.Run{}, fmt.Errorf("%w: verdict is required", errInvalid)
	case utf8.RuneCountInString(q.Context) > maxContext || hasControl(q.Context):
		return gaterun.Run{}, fmt.Errorf("%w: context %q: want at most %d printable characters", errInvalid, clip(q.Context), maxContext)
	case utf8.RuneCountInString(q.Description) > maxDescription:
		return gaterun.Run{}, fmt.Errorf("%w: description has %d characters, the forge keeps at most %d",
			errInvalid, utf8.RuneCountInString(q.Description), maxDescription)
	case hasControl(q.Description):
		return gaterun.Run{}, fmt.Errorf("%w: description %q: want printable characters", errInvalid, q.Description)
	case len(q.TargetURL) > maxTargetURL:
		return gaterun.Run{}, fmt.Errorf("%w: target_url has %d bytes, want at most %d", errInvalid, len(q.TargetURL), maxTargetURL)
	}
	if q.TargetURL != "" {
		u, err := url.Parse(q.TargetURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return gaterun.Run{}, fmt.Errorf("%w: target_url %q is not an absolute http(s) URL", errInvalid, q.TargetURL)
		}
	}
	if q.Context == "" {
		q.Context = gaterun.DefaultContext
	}
	sha := strings.ToLower(q.HeadSHA)
	run := gaterun.Run{
		ID: gaterun.ID(host, q.Repo, q.Pull, sha), Host: host, Repo: q.Repo, Pull: q.Pull,
		HeadSHA: sha, Context: q.Context, Verdict: gaterun.Verdict(q.Verdict),
		Description: q.Description, TargetURL: q.TargetURL,
	}
	return run, run.Validate()
}

// isCommitSHA reports whether s is a SHA-1 or SHA-256 object name: 40 or
// 64 hex digits.
func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// hasControl reports whether s holds a control character (NUL, newline,
// escape...), which no status field needs.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// clip shortens a value quoted in an error (httpjson.Clip).
var clip = httpjson.Clip

// jsonFields lists the JSON names of the fields of the struct v points
// to, in their order.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v).Elem()
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// jsonKind names the JSON type that decodes into t ("integer" for Go's int).
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// postRun is POST /api/runs: 401 without the bearer token; 413 for a body
// over Limits.MaxRunBodyBytes; 400 naming the field for a body it cannot
// use (nothing stored); in App mode, 422 naming the repository when no
// installation of the App covers it, and 503 with Retry-After when the
// forge could not say which does; 503 with Retry-After when the store
// does not answer within StoreTimeout; else it stores the run (with its
// installation), offers it on lane api, and answers 201 (new) or 200 (same
// repo, pull and head again) with {"id": ...}.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var q runRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxRunBodyBytes), &q); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", s.cfg.Limits.MaxRunBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	run, err := q.run(s.cfg.ForgeHost)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if run.Installation, err = s.installationOf(r.Context(), run.Repo); err != nil {
		s.refuseInstallation(w, run.Repo, err)
		return
	}
	ctx, cancel := s.storeCtx(r)
	created, err := s.cfg.Runs.Put(ctx, run, s.cfg.Now())
	cancel()
	if err != nil {
		s.log.Error("run not stored", "run", run.ID, "err", err)
		s.unavailable(w, "run not stored; retry")
		return
	}
	s.log.Info("run recorded", "run", run.ID, "repo", run.Repo, "pull", run.Pull, "installation", run.Installation,
		"head", run.HeadSHA, "verdict", run.Verdict, "created", created)
	s.offerAll(context.WithoutCancel(r.Context()), forge.LaneAPI, []gaterun.Run{run})
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, map[string]string{"id": run.ID})
}

// offerAll offers runs, all of one repository, on lane within
// OfferTimeout, on ctx, which the caller makes outlive the client's
// request: an offer once started is finished. Failures are logged by the
// reconciler and left for the sweeper. A rate limit stops the offers, as
// does, in App mode, a read GitHub refused for the installation's
// suspension with a token minted before it (forge.SuspendedTokenError):
// the installation is then checked as the sweeper checks it
// (installationSweeps.checkRefused), within OfferTimeout more, so the
// next offer or pass asks for no token GitHub would refuse.
func (s *Server) offerAll(ctx context.Context, lane string, runs []gaterun.Run) {
	octx, cancel := context.WithTimeout(ctx, s.cfg.OfferTimeout)
	defer cancel()
	for _, run := range runs {
		_, err := s.offer(octx, lane, run)
		if errors.Is(err, forge.ErrRateLimited) {
			return // the rest would be refused too; the sweeper repairs them
		}
		if refused := (*forge.SuspendedTokenError)(nil); errors.As(err, &refused) && s.sweeps != nil {
			s.sweeps.checkRefused(ctx, s.log.With("installation", refused.Installation), refused.Installation,
				lane, "a read made with the installation's token")
			return // the rest are the same installation's
		}
	}
}

// getHealthz is GET /healthz, the liveness check: 200 {"status": "ok"},
// or 503 with the lease health error when an elected net's work outlived
// its term or a pass outlived its deadline. It reads no store: a replica
// whose store is down is alive, and restarting it would not help.
func (s *Server) getHealthz(w http.ResponseWriter, _ *http.Request) {
	if err := s.health.Check(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "owner": s.cfg.Owner, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "owner": s.cfg.Owner})
}

// getReadyz is GET /readyz, the readiness check: 200 {"status": "ready"}
// when every store this replica serves from answers a read within
// StoreTimeout (the runs, the leases when they can be listed, the board
// when it runs), else 503 with Retry-After naming the first that did not.
// The delivery store is not read: it has no read, and in serve it shares
// the runs' database. One check answers every request for readyFor
// (readiness.check). The store's error goes to the log, not the answer:
// /readyz needs no token, and a driver's error describes the network
// behind the replica (a MongoDB server selection error lists every
// server's address and last error:
// https://github.com/mongodb/mongo-go-driver/pull/444).
func (s *Server) getReadyz(w http.ResponseWriter, r *http.Request) {
	if store, err := s.ready.check(r.Context(), s); err != nil {
		setRetryAfter(w, s.cfg.StoreTimeout)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "owner": s.cfg.Owner,
			"error": store + " did not answer a read; the replica's log says why"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "owner": s.cfg.Owner})
}

// readyFor is how long one /readyz check answers: /readyz needs no token,
// and a check reads every store (the lease store's whole collection), so
// without it anyone could turn requests into database reads one for one.
// A probe's period is seconds (Kubernetes' default is 10 s), so a
// second-old answer is as good as a fresh one.
const readyFor = time.Second

// readiness is /readyz's last check. Safe for concurrent use.
type readiness struct {
	mu    sync.Mutex
	at    time.Time // when the last check ended; zero: none yet
	store string
	err   error
}

// check returns the last check's result while it is under readyFor old,
// else checks the stores again (storesAnswer) within StoreTimeout, on a
// context the request's end does not cancel, logging a failure. Requests
// that come during a check wait for it and share its result.
func (rd *readiness) check(ctx context.Context, s *Server) (store string, err error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if age := s.cfg.Now().Sub(rd.at); !rd.at.IsZero() && age >= 0 && age < readyFor {
		return rd.store, rd.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StoreTimeout)
	defer cancel()
	rd.store, rd.err = s.storesAnswer(ctx)
	rd.at = s.cfg.Now()
	if rd.err != nil {
		s.log.Warn("not ready: a store did not answer", "store", rd.store, "err", rd.err)
	}
	return rd.store, rd.err
}

// storesAnswer reads each store once within ctx and returns the first
// failure and the store it came from.
func (s *Server) storesAnswer(ctx context.Context) (store string, err error) {
	if _, err := s.cfg.Runs.List(ctx, gaterun.Query{Limit: 1}); err != nil {
		return "run store", err
	}
	if insp, ok := s.cfg.Leases.(lease.Inspector); ok {
		if _, err := insp.Holders(ctx); err != nil {
			return "lease store", err
		}
	}
	if s.cfg.Board != nil {
		if _, err := s.cfg.Board.Cards(ctx, board.Query{Limit: 1}); err != nil {
			return "board store", err
		}
	}
	return "", nil
}
