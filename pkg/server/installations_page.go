// The installations view's handlers, GET /installations and GET
// /api/installations: the operator's view of the GitHub App's
// installations.

package server

import (
	"fmt"
	"net/http"
	"net/url"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/internal/page"
	"iterion.dev/iterion/pkg/gaterun"
	"iterion.dev/iterion/pkg/lease"
)

// errNoApp is the 404 of the installations view on a server that serves
// no App.
const errNoApp = "this server serves no GitHub App: it runs with a forge token or one installation, so it has no installations to list"

// installationRowsOf reads the view's parameters and answers its common
// failures (404 without an App, 400 naming a bad parameter or one the view
// does not take, 501 or 503
// when a store cannot or does not answer); else it returns the query and
// every installation's row, by ID, with each shard's holder ("" unheld).
// ok is false when it has answered.
func (s *Server) installationRowsOf(w http.ResponseWriter, r *http.Request) (q installationsQuery, rows []InstallationView, holders []string, ok bool) {
	app := s.cfg.App
	if app == nil {
		writeError(w, http.StatusNotFound, errNoApp)
		return q, nil, nil, false
	}
	params := r.URL.Query()
	q, err := parseInstallationsQuery(params.Get)
	if msg := httpjson.UnknownParam(params, "sort", "limit", "cursor"); msg != "" {
		err = fmt.Errorf("%w: %s", errInvalid, msg)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return q, nil, nil, false
	}
	insp, canList := s.cfg.Leases.(lease.Inspector)
	if !canList {
		writeError(w, http.StatusNotImplemented, "the lease store cannot list its leases, so the shards' holders are not known")
		return q, nil, nil, false
	}
	runs, keeps := s.cfg.Runs.(gaterun.InstallationStore)
	if !keeps {
		writeError(w, http.StatusNotImplemented, "the run store keeps no installation records (gaterun.InstallationStore)")
		return q, nil, nil, false
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	hs, err := insp.Holders(ctx)
	if err != nil {
		s.storeFailed(w, "leases not read", err)
		return q, nil, nil, false
	}
	sweeps, err := runs.Sweeps(ctx)
	if err != nil {
		s.storeFailed(w, "installation sweeps not read", err)
		return q, nil, nil, false
	}
	open, err := runs.OpenRuns(ctx)
	if err != nil {
		s.storeFailed(w, "open runs not counted", err)
		return q, nil, nil, false
	}
	now := s.cfg.Now()
	shards := s.cfg.SweepShards
	holders = MergeGateSweeper().shardHolders(hs, shards, now)
	bySweep := make(map[int64]gaterun.InstallationSweep, len(sweeps))
	for _, sw := range sweeps {
		bySweep[sw.Installation] = sw
	}
	rows = installationRows(installationsInput{
		now: now, self: s.cfg.Owner, installations: app.Installations(), suspended: app.Suspended(),
		shardOf: func(id int64) int { return InstallationShard(id, shards) }, holders: holders,
		sweeps: bySweep, local: app.Budgets, open: open,
	})
	return q, rows, holders, true
}

// getInstallationsJSON is GET /api/installations?sort=&limit=&cursor=
// (page token): one page of Installations; 400 naming a bad parameter or
// another one;
// 404 with {"error"} when the server serves no App.
func (s *Server) getInstallationsJSON(w http.ResponseWriter, r *http.Request) {
	q, rows, holders, ok := s.installationRowsOf(w, r)
	if !ok {
		return
	}
	out := Installations{AsOf: s.cfg.Now().UTC(), Shards: len(holders)}
	out.Installations, out.Next = pageOf(rows, q)
	writeJSON(w, http.StatusOK, out)
}

// getInstallationsPage is GET /installations?sort=&cursor=: a summary of
// every installation, then one page of them, the lowest budget first
// unless ?sort=id.
func (s *Server) getInstallationsPage(w http.ResponseWriter, r *http.Request) {
	q, rows, holders, ok := s.installationRowsOf(w, r)
	if !ok {
		return
	}
	body := installationsBody{Summary: summarize(rows, holders, s.cfg.Owner), Sort: q.sort, First: q.after == nil}
	var next string
	body.Rows, next = pageOf(rows, q)
	if next != "" {
		body.Next = "?" + url.Values{"sort": {q.sort}, "limit": {r.URL.Query().Get("limit")}, "cursor": {next}}.Encode()
	}
	s.render(w, installationsPage, "Installations", body)
}

// installationsSummary is the line above the table: every installation
// counted, not only the page's.
type installationsSummary struct {
	Installations, Shards int
	// UnheldShards no replica holds; Unswept installations, not
	// suspended, are on one of them, so nothing sweeps them now.
	UnheldShards, Unswept int
	// Suspended is the suspended installations, RunsSuspended their open
	// runs, which wait until they are unsuspended.
	Suspended, RunsSuspended int
	// HeldHere is the shards the serving replica holds.
	HeldHere int
	// Never is the installations, not suspended, with no complete pass
	// recorded.
	Never int
	// RunsOpen is every installation's open runs, RunsUncovered those of
	// them no installation covers (InstallationView.RunsUncovered).
	RunsOpen, RunsUncovered int
	// Lowest is the installation, not suspended, with the lowest budget;
	// nil when none has a figure. A suspended installation has no budget
	// it can spend, whatever its last figures say.
	Lowest *InstallationView
}

// summarize counts rows and the shards' holders for the summary line.
func summarize(rows []InstallationView, holders []string, self string) installationsSummary {
	sum := installationsSummary{Installations: len(rows), Shards: len(holders)}
	for _, h := range holders {
		switch h {
		case "":
			sum.UnheldShards++
		case self:
			sum.HeldHere++
		}
	}
	for _, v := range rows {
		switch {
		case v.Suspended:
			sum.Suspended++
			sum.RunsSuspended += v.RunsOpen
		case v.Holder == "":
			sum.Unswept++
		}
		if v.LastPass == nil && !v.Suspended {
			sum.Never++
		}
		sum.RunsOpen += v.RunsOpen
		sum.RunsUncovered += v.RunsUncovered
		if !v.Suspended && budgetKey(v) < budgetKeyOf(sum.Lowest) {
			sum.Lowest = &v
		}
	}
	return sum
}

// budgetKeyOf is budgetKey of v, the largest key for nil.
func budgetKeyOf(v *InstallationView) int {
	if v == nil {
		return budgetKey(InstallationView{})
	}
	return budgetKey(*v)
}

// installationsBody is the /installations page.
type installationsBody struct {
	Summary installationsSummary
	Rows    []InstallationView
	// Sort is the page's order; First is true on its first page; Next is
	// the query of the next page, "" on the last.
	Sort  string
	First bool
	Next  string
}

var installationsPage = page.New(`{{define "content"}}{{with .Body}}{{with .Summary}}
<ul>
<li>{{.Installations}} installation{{if ne .Installations 1}}s{{end}} of the App on {{.Shards}} sweeper shard{{if ne .Shards 1}}s{{end}}; this replica holds {{.HeldHere}}.</li>
<li>{{if .UnheldShards}}<span class="bad">{{.UnheldShards}} shard{{if ne .UnheldShards 1}}s are{{else}} is{{end}} unheld: nothing sweeps {{.Unswept}} installation{{if ne .Unswept 1}}s{{end}} now.</span>{{else}}Every shard is held.{{end}}</li>
{{if .Suspended}}<li><span class="bad">{{.Suspended}} installation{{if ne .Suspended 1}}s are{{else}} is{{end}} suspended: GitHub serves {{if ne .Suspended 1}}them{{else}}it{{end}} no token, so nothing sweeps {{if ne .Suspended 1}}them{{else}}it{{end}}, and {{.RunsSuspended}} open run{{if ne .RunsSuspended 1}}s wait{{else}} waits{{end}} until an owner of the account unsuspends it.</span></li>{{end}}
{{if .Never}}<li>{{.Never}} never had a complete pass recorded.</li>{{end}}
<li>{{with .Lowest}}Lowest budget: installation {{.ID}} (<code>{{.Account}}</code>), {{lowest .}} left.{{else}}No budget is known yet.{{end}}</li>
<li>{{.RunsOpen}} run{{if ne .RunsOpen 1}}s{{end}} open{{if .RunsUncovered}}; <span class="bad">{{.RunsUncovered}} of them under a repository no installation of the App covers: no verdict of theirs is published</span>{{end}}.</li>
</ul>{{end}}
<p>Order: {{if eq .Sort "budget"}}<strong>lowest budget first</strong> · <a href="?sort=id">by ID</a>{{else}}<a href="?sort=budget">lowest budget first</a> · <strong>by ID</strong>{{end}}.
A shard's holder is the owner of its lease; the last pass and the budgets are read from the run store, so every replica shows the same. <a href="/api/installations?sort={{.Sort}}">JSON</a></p>
<div class="scroll"><table><thead><tr><th class="num">ID</th><th>account</th><th class="num">shard</th><th>holder</th><th>last complete pass</th><th class="num">core left</th><th class="num">GraphQL left</th><th class="num">runs open</th></tr></thead><tbody>
{{range .Rows}}<tr{{if .HeldByMe}} class="self"{{end}}><td class="num">{{.ID}}</td><td><code>{{.Account}}</code></td><td class="num">{{.Shard}}</td>
<td>{{if .Suspended}}<span class="bad">suspended{{with .SuspendedAt}} since {{when .}}{{end}}: not swept</span>{{else if .Holder}}<code>{{.Holder}}</code>{{if .HeldByMe}} (this replica){{end}}{{else}}<span class="bad">none</span>{{end}}</td>
<td>{{with .LastPass}}{{when .}}{{else}}<span class="muted">never</span>{{end}}</td>
<td class="num">{{budget .CoreRemaining}}</td><td class="num">{{budget .GraphQLRemaining}}</td><td class="num">{{.RunsOpen}}{{with .RunsUncovered}} <span class="bad" title="no installation of the App covers their repository">({{.}} uncovered)</span>{{end}}</td></tr>
{{else}}<tr><td colspan="8">{{if .First}}the App has no installations{{else}}no more installations{{end}}</td></tr>
{{end}}</tbody></table></div>
{{if .Next}}<p><a href="{{.Next}}">next page</a></p>{{end}}
{{if not .First}}<p><a href="?sort={{.Sort}}">first page</a></p>{{end}}
{{end}}{{end}}`, map[string]any{
	"budget": func(n *int) any {
		if n == nil {
			return "not known"
		}
		return *n
	},
	"lowest": func(v InstallationView) int { return budgetKey(v) },
})
