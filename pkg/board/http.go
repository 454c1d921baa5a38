package board

import (
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/internal/httpjson"
)

// Board page limits: GET /board shows DefaultLimit cards unless
// ?limit= asks for more, up to MaxLimit.
const (
	DefaultLimit = 500
	MaxLimit     = 5000
)

// CardView is one card as GET /board?format=json shows it.
type CardView struct {
	Host        string    `json:"host"`
	Repo        string    `json:"repo"`
	Number      int       `json:"number"`
	Title       string    `json:"title"`
	State       string    `json:"state"`
	Labels      []string  `json:"labels"`
	Assignees   []string  `json:"assignees"`
	PullRequest bool      `json:"pull_request"`
	URL         string    `json:"url"`
	Updated     time.Time `json:"updated"` // RFC 3339
}

// Handler serves GET /board: the cards of store, most recently updated
// first, as a small HTML page, or with ?format=json as a JSON array of
// CardView. ?repo=owner/name and ?state=open|closed filter, ?limit=N bounds
// (DefaultLimit, at most MaxLimit); a bad parameter answers 400
// naming it. A nil store (no repositories configured) answers 404; a nil
// logger discards the page's rendering errors.
func Handler(store Store, logger *slog.Logger) http.HandlerFunc {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if store == nil {
			httpjson.Error(w, http.StatusNotFound, "the forge board is not configured: no repositories to sync (--board-repos)")
			return
		}
		q, msg := boardQueryOf(r)
		if msg != "" {
			httpjson.Error(w, http.StatusBadRequest, msg)
			return
		}
		cards, err := store.Cards(r.Context(), q)
		if err != nil {
			httpjson.Error(w, http.StatusServiceUnavailable, "board not read: "+err.Error())
			return
		}
		views := make([]CardView, len(cards))
		for i, c := range cards {
			views[i] = CardView{Host: c.Host, Repo: c.Repo, Number: c.Number, Title: c.Title, State: c.State,
				Labels: nonNil(c.Labels), Assignees: nonNil(c.Assignees), PullRequest: c.PullRequest, URL: c.URL,
				Updated: c.Updated.UTC()}
		}
		if r.URL.Query().Get("format") == "json" {
			httpjson.Write(w, http.StatusOK, views)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := boardTemplate.Execute(w, boardPage{Query: q, Cards: views}); err != nil {
			logger.Warn("board page", "err", err)
		}
	}
}

// boardQueryOf reads GET /board's parameters; msg names a bad one.
func boardQueryOf(r *http.Request) (q Query, msg string) {
	v := r.URL.Query()
	q = Query{Repo: v.Get("repo"), State: v.Get("state"), Limit: DefaultLimit}
	if q.Repo != "" && !validRepo(q.Repo) {
		return q, "repo " + strconv.Quote(q.Repo) + " is not owner/name"
	}
	if q.State != "" && q.State != "open" && q.State != "closed" {
		return q, "state " + strconv.Quote(q.State) + " is not open or closed"
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return q, "limit " + strconv.Quote(s) + " is not a number from 1 to " + strconv.Itoa(MaxLimit)
		}
		q.Limit = n
	}
	if f := v.Get("format"); f != "" && f != "json" && f != "html" {
		return q, "format " + strconv.Quote(f) + " is not json or html"
	}
	return q, ""
}

type boardPage struct {
	Query Query
	Cards []CardView
}

var boardTemplate = template.Must(template.New("board").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, ", ") },
	"time": func(t time.Time) string { return t.Format(time.RFC3339) },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>iterion board</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .8em;text-align:left}.closed{color:#999}</style>
</head><body>
<h1>Forge board</h1>
<p>{{len .Cards}} cards{{with .Query.Repo}} of {{.}}{{end}}{{with .Query.State}}, {{.}}{{end}}, most recently updated first · <a href="?format=json">JSON</a></p>
<table><tr><th>repository</th><th>#</th><th>kind</th><th>title</th><th>state</th><th>labels</th><th>assignees</th><th>updated</th></tr>
{{range .Cards}}<tr class="{{.State}}"><td>{{.Host}}/{{.Repo}}</td><td>{{.Number}}</td><td>{{if .PullRequest}}pull request{{else}}issue{{end}}</td><td>{{if .URL}}<a href="{{.URL}}">{{.Title}}</a>{{else}}{{.Title}}{{end}}</td><td>{{.State}}</td><td>{{join .Labels}}</td><td>{{join .Assignees}}</td><td>{{time .Updated}}</td></tr>
{{else}}<tr><td colspan="8">no cards yet: the first pass is one interval after a replica is elected</td></tr>
{{end}}</table>
</body></html>
`))
