package server

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/internal/page"
	"iterion.dev/iterion/pkg/gaterun"
)

// Run listing limits: GET /api/runs answers DefaultRunsLimit runs a page
// unless ?limit= asks for another number, up to MaxRunsLimit; /runs shows
// the first DefaultRunsLimit unsettled runs.
const (
	DefaultRunsLimit = 100
	MaxRunsLimit     = 1000
)

// runView is one run as GET /api/runs and GET /api/runs/{id} show it.
type runView struct {
	ID          string          `json:"id"`
	Host        string          `json:"host"`
	Repo        string          `json:"repo"`
	Pull        int             `json:"pull"`
	HeadSHA     string          `json:"head_sha"`
	Context     string          `json:"context"`
	Verdict     gaterun.Verdict `json:"verdict"`
	Description string          `json:"description"`
	TargetURL   string          `json:"target_url"`
	Created     time.Time       `json:"created"` // RFC 3339
	Updated     time.Time       `json:"updated"` // RFC 3339
	// Reported is when the run's verdict was last reported
	// (gaterun.Run.Reported), RFC 3339: a move to another installation
	// changes Updated, not Reported. Of the unsettled runs of one commit
	// and context, the one reported last decides the commit's status.
	// Absent when the store keeps no report time for the run.
	Reported time.Time `json:"reported_at,omitzero"`
	Settled  bool      `json:"settled"`
	// Installation is the App installation that offers the run; 0 when
	// the server has one credential (a token or one installation).
	Installation int64 `json:"installation"`
	// LastOffer is the run's last offer on the replica that answered,
	// absent when it made none since it started (another replica may have).
	LastOffer *offerRecord `json:"last_offer,omitempty"`
	// SupersededBy, on /runs, is the pull request whose run of the same
	// commit and context decides its status instead (its verdict was
	// reported later); 0 when this run decides or no run on the page
	// supersedes it.
	SupersededBy int `json:"-"`
}

// runsList is the answer of GET /api/runs.
type runsList struct {
	Runs []runView `json:"runs"`
	// Next, when present, is the cursor of the next page: pass it back as
	// ?cursor= with the same filters. Absent on the last page.
	Next string `json:"next,omitempty"`
}

// view is run as the API shows it, with its last offer on this replica.
func (s *Server) view(run gaterun.Run) runView {
	v := runView{ID: run.ID, Host: run.Host, Repo: run.Repo, Pull: run.Pull, HeadSHA: run.HeadSHA,
		Context: run.Context, Verdict: run.Verdict, Description: run.Description, TargetURL: run.TargetURL,
		Created: run.Created, Updated: run.Updated, Reported: run.Reported, Settled: run.Settled, Installation: run.Installation}
	if rec, ok := s.seen.lastOffer(run.ID); ok {
		v.LastOffer = &rec
	}
	return v
}

// authorized reports whether r carries the API's bearer token; when not, it
// has answered 401.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.APIToken)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="iterion"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return false
	}
	return true
}

// page serves h to requests that carry a page token (PagesToken or
// APIToken, as a bearer token or basic auth's password), or to every
// request with PublicPages; others get 401 with the schemes they may use.
func (s *Server) page(h http.Handler) http.Handler {
	if s.cfg.PublicPages {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.pageAuthorized(r) {
			w.Header().Add("WWW-Authenticate", `Bearer realm="iterion"`)
			w.Header().Add("WWW-Authenticate", `Basic realm="iterion", charset="UTF-8"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong token: send the pages token or the API token as a bearer token or a basic auth password")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// pageAuthorized reports whether r carries PagesToken or APIToken, as a
// bearer token or as basic auth's password.
func (s *Server) pageAuthorized(r *http.Request) bool {
	token, ok := "", false
	if _, pw, basic := r.BasicAuth(); basic {
		token, ok = pw, true
	} else if scheme, t, cut := strings.Cut(r.Header.Get("Authorization"), " "); cut && strings.EqualFold(scheme, "Bearer") {
		token, ok = t, true
	}
	if !ok {
		return false
	}
	match := subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.APIToken)) == 1
	if s.cfg.PagesToken != "" {
		match = subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.PagesToken)) == 1 || match
	}
	return match
}

// getRun is GET /api/runs/{id}: 401 without the bearer token, 404 for an
// unknown id, else the run as a runView.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	ctx, cancel := s.storeCtx(r)
	run, err := s.cfg.Runs.Get(ctx, r.PathValue("id"))
	cancel()
	switch {
	case errors.Is(err, gaterun.ErrNotFound):
		writeError(w, http.StatusNotFound, "no run with id "+strconv.Quote(r.PathValue("id")))
	case err != nil:
		s.storeFailed(w, "run not read", err)
	default:
		writeJSON(w, http.StatusOK, s.view(run))
	}
}

// listRuns is GET /api/runs?repo=&pull=&installation=&state=&limit=&cursor=: 401 without
// the bearer token; 400 naming a bad parameter or another one; else a runsList of this
// forge host's runs in listing order (Updated, then ID).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	q, err := s.runQueryOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := q.Limit
	q.Limit++ // one more tells whether a next page exists
	ctx, cancel := s.storeCtx(r)
	runs, err := s.cfg.Runs.List(ctx, q)
	cancel()
	if err != nil {
		s.storeFailed(w, "runs not read", err)
		return
	}
	out := runsList{Runs: []runView{}}
	if len(runs) > limit {
		runs = runs[:limit]
		out.Next = encodeCursor(gaterun.CursorAt(runs[limit-1]))
	}
	for _, run := range runs {
		out.Runs = append(out.Runs, s.view(run))
	}
	writeJSON(w, http.StatusOK, out)
}

// runQueryOf reads GET /api/runs's parameters; an error wraps errInvalid,
// or gaterun.ErrInvalid from the query's Validate, and names the bad one,
// or one the list does not take.
func (s *Server) runQueryOf(r *http.Request) (gaterun.Query, error) {
	v := r.URL.Query()
	q := gaterun.Query{Host: s.cfg.ForgeHost, Repo: v.Get("repo"), State: gaterun.State(v.Get("state")), Limit: DefaultRunsLimit}
	if msg := httpjson.UnknownParam(v, "repo", "pull", "installation", "state", "limit", "cursor"); msg != "" {
		return q, fmt.Errorf("%w: %s", errInvalid, msg)
	}
	if p := v.Get("pull"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("%w: pull %q is not a pull request number", errInvalid, p)
		}
		q.Pull = n
	}
	if in := v.Get("installation"); in != "" {
		n, err := strconv.ParseInt(in, 10, 64)
		if err != nil || n < 1 {
			return q, fmt.Errorf("%w: installation %q is not an installation id", errInvalid, in)
		}
		q.Installation = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxRunsLimit {
			return q, fmt.Errorf("%w: limit %q is not a number from 1 to %d", errInvalid, l, MaxRunsLimit)
		}
		q.Limit = n
	}
	if c := v.Get("cursor"); c != "" {
		cur, ok := decodeCursor(c)
		if !ok {
			return q, fmt.Errorf("%w: cursor %q is not a next value of this API", errInvalid, c)
		}
		q.After = cur
	}
	return q, q.Validate()
}

// encodeCursor is c as GET /api/runs's opaque cursor: base64url of the
// instant (Unix milliseconds) and the run id.
func encodeCursor(c gaterun.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Updated.UnixMilli(), 10) + " " + c.ID))
}

// decodeCursor reads a cursor encodeCursor wrote.
func decodeCursor(s string) (gaterun.Cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return gaterun.Cursor{}, false
	}
	ms, id, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || id == "" {
		return gaterun.Cursor{}, false
	}
	return gaterun.Cursor{Updated: time.UnixMilli(n).UTC(), ID: id}, true
}

// getRunsPage is GET /runs: the first DefaultRunsLimit unsettled runs, the
// longest unchanged first, each with its last offer on this replica, its
// backoff, and the pull request whose later run of the same commit and
// context supersedes it, when the page shows one.
func (s *Server) getRunsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.storeCtx(r)
	runs, err := s.cfg.Runs.List(ctx, gaterun.Query{Host: s.cfg.ForgeHost, State: gaterun.StateUnsettled, Limit: DefaultRunsLimit})
	cancel()
	if err != nil {
		s.storeFailed(w, "runs not read", err)
		return
	}
	views := make([]runView, len(runs))
	for i, run := range runs {
		views[i] = s.view(run)
		if by := decides(runs, run); by.ID != run.ID {
			views[i].SupersededBy = by.Pull
		}
	}
	s.render(w, runsPage, "Runs", runsBody{Runs: views, Limit: DefaultRunsLimit, App: s.cfg.App != nil})
}

type runsBody struct {
	Runs  []runView
	Limit int
	App   bool // App mode: each run shows its installation
}

var runsPage = page.New(`{{define "content"}}{{with .Body}}
<p>{{len .Runs}} unsettled run{{if ne (len .Runs) 1}}s{{end}}{{if eq (len .Runs) .Limit}} (the first {{.Limit}}){{end}}, the longest unchanged first. The last offer is this replica's; the sweeper's leader may be another. When runs of pull requests sharing a head disagree, the one whose verdict was reported last decides the commit's status. JSON: <code>GET /api/runs?state=unsettled</code> with the API token.</p>
<div class="scroll"><table><thead><tr><th>pull request</th>{{if .App}}<th>installation</th>{{end}}<th>head</th><th>verdict</th><th>updated</th><th>last offer here</th><th>backoff</th></tr></thead><tbody>
{{range .Runs}}<tr><td class="nowrap">{{.Repo}}#{{.Pull}}</td>{{if $.Body.App}}<td>{{.Installation}}</td>{{end}}<td><code title="{{.HeadSHA}}">{{short .HeadSHA}}</code></td><td>{{.Verdict}}{{with .SupersededBy}} <span class="muted" title="a later run of the same commit and context decides its status">superseded by #{{.}}</span>{{end}}</td><td>{{when .Updated}}</td>
<td>{{with .LastOffer}}<span class="{{if or (eq .Outcome "failed") (eq .Outcome "unreadable")}}bad{{end}}"{{with .Error}} title="{{.}}"{{end}}>{{.Outcome}}</span> ({{.Lane}}) {{when .At}}{{else}}<span class="muted">none here</span>{{end}}</td>
<td>{{with .LastOffer}}{{if .RetryAt.IsZero}}{{if eq .Outcome "failed"}}next offer{{else if eq .Outcome "unreadable"}}the sweeper backs off, doubling up to a deep pass{{else}}<span class="muted">none</span>{{end}}{{else}}rate limited until {{when .RetryAt}}{{end}}{{else}}<span class="muted">none</span>{{end}}</td></tr>
{{else}}<tr><td colspan="7">no unsettled runs</td></tr>
{{end}}</tbody></table></div>
{{end}}{{end}}`, map[string]any{"short": func(sha string) string { return sha[:min(len(sha), 12)] }})
