package board

import (
	"cmp"
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/internal/page"
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

// View is GET /board?format=json: the sync's status and the cards.
type View struct {
	// Status is null when the handler has no status source.
	Status *StatusView `json:"status"`
	Cards  []CardView  `json:"cards"`
}

// StatusView is Status as GET /board?format=json shows it; every field is
// always present, with the meaning of Status's field of the same name.
type StatusView struct {
	Syncer        string `json:"syncer"`
	SyncerUnknown bool   `json:"syncer_unknown"`
	Self          bool   `json:"self"`
	Shards        int    `json:"shards"`
	// Syncers is [] rather than null when empty.
	Syncers []string `json:"syncers"`
	Held    int      `json:"held"`
	// LastPass is null when the serving replica has made no complete pass.
	LastPass *time.Time `json:"last_pass"` // RFC 3339
}

func statusView(st Status) *StatusView {
	v := &StatusView{Syncer: st.Syncer, SyncerUnknown: st.SyncerUnknown, Self: st.Self, Shards: st.Shards,
		Syncers: nonNil(st.Syncers), Held: st.Held}
	if !st.LastPass.IsZero() {
		last := st.LastPass.UTC()
		v.LastPass = &last
	}
	return v
}

// Handler serves GET /board: the cards of store, most recently updated
// first, as a small HTML page, or with ?format=json as a View. ?repo=owner/name and ?state=open|closed filter, ?limit=N bounds
// (DefaultLimit, at most MaxLimit); a bad parameter, or one it does not
// take, answers 400 naming it.
// A nil store (no repositories configured) answers 404, a store error 503
// without the error's text, and a stored card the store cannot read
// (ErrMalformed, from a store that answers it rather than skip the card
// as MongoStore does) 500, also without it. Cards updated in
// the same second come by repository, then number as a number. render
// writes the HTML page in the server's shared layout; nil renders it in
// that layout with no navigation, logging nothing. status, when not nil,
// says on the HTML page and in the View which replica syncs and how fresh
// the cards are.
func Handler(store Store, render func(http.ResponseWriter, *page.Template, string, any), status func(context.Context) Status) http.HandlerFunc {
	if render == nil {
		render = func(w http.ResponseWriter, t *page.Template, title string, body any) {
			page.SetHeaders(w.Header())
			_ = t.Execute(w, page.Data{Title: title, Now: time.Now(), Body: body})
		}
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
		switch {
		case errors.Is(err, ErrMalformed):
			// No retry mends a stored card the store cannot read; the
			// store's owner logs which.
			httpjson.Error(w, http.StatusInternalServerError, "board not read: a stored card is malformed (the replica's log names it)")
			return
		case err != nil:
			// Not quoted: a store driver's error describes the network
			// behind the server, and the page may be open to anyone.
			// The store's owner logs it.
			httpjson.Error(w, http.StatusServiceUnavailable, "board not read; retry")
			return
		}
		slices.SortStableFunc(cards, func(a, b Card) int {
			return cmp.Or(b.Updated.Truncate(time.Second).Compare(a.Updated.Truncate(time.Second)),
				cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.Number, b.Number))
		})
		views := make([]CardView, len(cards))
		for i, c := range cards {
			views[i] = CardView{Host: c.Host, Repo: c.Repo, Number: c.Number, Title: c.Title, State: c.State,
				Labels: nonNil(c.Labels), Assignees: nonNil(c.Assignees), PullRequest: c.PullRequest, URL: c.URL,
				Updated: c.Updated.UTC()}
		}
		var st *Status
		if status != nil {
			s := status(r.Context())
			st = &s
		}
		if r.URL.Query().Get("format") == "json" {
			v := View{Cards: views}
			if st != nil {
				v.Status = statusView(*st)
			}
			httpjson.Write(w, http.StatusOK, v)
			return
		}
		filters := url.Values{}
		for k, v := range map[string]string{"repo": q.Repo, "state": q.State} {
			if v != "" {
				filters.Set(k, v)
			}
		}
		if l := r.URL.Query().Get("limit"); l != "" {
			filters.Set("limit", l)
		}
		filters.Set("format", "json")
		bp := boardPage{Query: q, Cards: views, JSON: "?" + filters.Encode(), Filtered: q.Repo != "" || q.State != "", Status: st}
		render(w, boardTemplate, "Forge board", bp)
	}
}

// boardQueryOf reads GET /board's parameters; msg names a bad one, or one
// the board does not take.
func boardQueryOf(r *http.Request) (q Query, msg string) {
	v := r.URL.Query()
	q = Query{Repo: v.Get("repo"), State: v.Get("state"), Limit: DefaultLimit}
	if msg := httpjson.UnknownParam(v, "repo", "state", "limit", "format"); msg != "" {
		return q, msg
	}
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
	// JSON is the page's JSON link, with its filters.
	JSON string
	// Filtered: a repo or state filter is set, so no card means none
	// matches, not that the board has not synced yet.
	Filtered bool
	// Status is the sync's, when the handler has a status source.
	Status *Status
}

// Status is what GET /board says of the sync, as the serving replica knows
// it: which replicas sync the board and how fresh its cards are. The board
// is synced under one lease, or in App mode by a lease group whose shards
// (Shards > 0) split the board's installations among their holders.
type Status struct {
	// Syncer owns the board's lease; "" when nobody holds it unexpired,
	// when SyncerUnknown, or in App mode, where Syncers says who syncs.
	Syncer string
	// SyncerUnknown is true when the lease store did not say who holds
	// the lease or the group's shards: the page then says so, never that
	// nobody syncs.
	SyncerUnknown bool
	// Self is true when the serving replica is the syncer, or in App mode
	// one of the Syncers.
	Self bool
	// Shards is how many shards the board's lease group has in App mode;
	// 0 under one lease.
	Shards int
	// Syncers, in App mode, are the owners of the group's unexpired shard
	// leases, each once, sorted; empty when no shard is held or when
	// SyncerUnknown, and always under one lease.
	Syncers []string
	// Held, in App mode, is how many of the Shards an unexpired lease
	// holds: the others' installations are not synced until a replica
	// takes them. 0 under one lease.
	Held int
	// LastPass is when the serving replica's last complete pass ended;
	// zero when it has made none. Another replica's passes are not known
	// here.
	LastPass time.Time
}

var boardTemplate = page.New(`{{define "content"}}{{with .Body}}
{{with .Status}}<p>{{if .SyncerUnknown}}Who syncs is not known: the lease store did not answer{{else if .Shards}}{{if .Syncers}}Synced by {{range $i, $o := .Syncers}}{{if $i}}, {{end}}<code>{{$o}}</code>{{end}}{{if .Self}} (this replica among them){{end}} · {{.Held}} of {{.Shards}} shard{{if ne .Shards 1}}s{{end}} held{{else}}No replica holds a shard of the board's lease group: nobody syncs now{{end}}{{else if .Syncer}}Synced by <code>{{.Syncer}}</code>{{if .Self}} (this replica){{end}}{{else}}No replica holds the board's lease: nobody syncs now{{end}} · {{if .LastPass.IsZero}}last complete pass: {{if .Self}}none yet{{else}}<span class="muted">not known here</span>{{end}}{{else}}last complete pass {{when .LastPass}}{{end}}</p>{{end}}
<p>{{len .Cards}} card{{if ne (len .Cards) 1}}s{{end}}{{with .Query.Repo}} of {{.}}{{end}}{{with .Query.State}}, {{.}}{{end}}, most recently updated first · <a href="{{.JSON}}">JSON</a></p>
<div class="scroll"><table><thead><tr><th>repository</th><th class="num">#</th><th>kind</th><th>title</th><th>state</th><th>labels</th><th>assignees</th><th>updated</th></tr></thead><tbody>
{{range .Cards}}<tr class="{{.State}}"><td>{{.Host}}/{{.Repo}}</td><td class="num">{{.Number}}</td><td>{{if .PullRequest}}pull request{{else}}issue{{end}}</td><td>{{if .URL}}<a href="{{.URL}}">{{.Title}}</a>{{else}}{{.Title}}{{end}}</td><td>{{.State}}</td><td>{{join .Labels}}</td><td>{{join .Assignees}}</td><td>{{when .Updated}}</td></tr>
{{else}}<tr><td colspan="8">{{if .Filtered}}no cards match these filters{{else}}no cards yet: the first pass is one interval after a replica is elected{{end}}</td></tr>
{{end}}</tbody></table></div>
{{end}}{{end}}`, template.FuncMap{"join": func(s []string) string { return strings.Join(s, ", ") }})
