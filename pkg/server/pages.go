package server

import (
	"net/http"
	"strconv"
	"time"

	"iterion.dev/iterion/internal/httpjson"
	"iterion.dev/iterion/internal/page"
	"iterion.dev/iterion/pkg/lease"
)

// nav is the navigation bar of every page: each page, /metrics and /healthz.
func (s *Server) nav() []page.Link {
	links := []page.Link{{Href: "/", Text: "iterion"}, {Href: "/leases", Text: "leases"}, {Href: "/runs", Text: "runs"}}
	if s.cfg.Board != nil {
		links = append(links, page.Link{Href: "/board", Text: "board"})
	}
	if s.cfg.App != nil {
		links = append(links, page.Link{Href: "/installations", Text: "installations"})
	}
	return append(links, page.Link{Href: "/metrics", Text: "metrics"}, page.Link{Href: "/healthz", Text: "healthz"})
}

// render writes the page tmpl titled title with body, with the page
// headers (page.SetHeaders), logging a failure (the client is usually
// gone).
func (s *Server) render(w http.ResponseWriter, tmpl *page.Template, title string, body any) {
	page.SetHeaders(w.Header())
	err := tmpl.Execute(w, page.Data{Title: title, Owner: s.cfg.Owner, Now: s.cfg.Now(), Nav: s.nav(), Body: body})
	if err != nil {
		s.log.Warn("page not written", "page", title, "err", err)
	}
}

// leaseView is one lease as GET /leases?format=json shows it.
type leaseView struct {
	Name    string    `json:"name"`
	Owner   string    `json:"owner"`
	Expires time.Time `json:"expires"` // RFC 3339
	// Expired is true when Expires is not after the replica's now: any
	// candidate may take the lease.
	Expired bool `json:"expired"`
}

// termRow is one lease on the index and /leases pages.
type termRow struct {
	leaseView
	// Self: this replica holds it. Started is its term's start, known for
	// this replica's own terms only (zero otherwise).
	Self    bool
	Started time.Time
	// TTL is this replica's TTL for the lease (its Lease × its net's
	// interval); 0 for a lease it does not elect.
	TTL time.Duration
}

// leaseRows reads the lease store's holders, as rows and as the lease
// groups they show; 501 or 503 is answered and ok is false when it cannot.
func (s *Server) leaseRows(w http.ResponseWriter, r *http.Request) (rows []termRow, groups []lease.GroupView, ok bool) {
	insp, ok := s.cfg.Leases.(lease.Inspector)
	if !ok {
		writeError(w, http.StatusNotImplemented, "the lease store cannot list its leases")
		return nil, nil, false
	}
	ctx, cancel := s.storeCtx(r)
	holders, err := insp.Holders(ctx)
	cancel()
	if err != nil {
		s.storeFailed(w, "leases not read", err)
		return nil, nil, false
	}
	ttls := map[string]time.Duration{}
	for _, n := range s.nets() {
		ttls[n.lease.Name] = n.lease.TTL(n.interval)
	}
	now := s.cfg.Now()
	rows = make([]termRow, len(holders))
	for i, h := range holders {
		row := termRow{leaseView: leaseView{Name: h.Name, Owner: h.Owner, Expires: h.Expires.UTC(), Expired: !now.Before(h.Expires)},
			Self: h.Owner == s.cfg.Owner, TTL: ttls[h.Name]}
		if row.Self {
			row.Started, _ = s.seen.termStart(h.Name)
		}
		rows[i] = row
	}
	return rows, lease.Groups(holders, now), true
}

// getIndex is GET /: links to every page, this replica's owner, the
// leases it holds, and its shards of each lease group.
func (s *Server) getIndex(w http.ResponseWriter, r *http.Request) {
	rows, groups, ok := s.leaseRows(w, r)
	if !ok {
		return
	}
	all := byGroup(rows, groups)
	body := indexBody{Links: s.nav()[1:], Nets: len(s.nets())}
	for _, row := range all.Rows {
		if row.Self && !row.Expired {
			body.Held = append(body.Held, row)
		}
	}
	for _, g := range groups {
		held := heldShards{Name: g.Name, Shards: g.Shards}
		for i, owner := range g.Holders {
			if owner == s.cfg.Owner {
				held.Held = append(held.Held, i)
			}
		}
		if len(held.Held) > 0 {
			body.Groups = append(body.Groups, held)
		}
	}
	s.render(w, indexPage, "iterion", body)
}

type indexBody struct {
	Links []page.Link
	// Held are the leases of no group this replica holds; Groups its
	// shards of each group it holds some of.
	Held   []termRow
	Groups []heldShards
	Nets   int
}

// heldShards is the shards of one lease group a replica holds.
type heldShards struct {
	Name   string
	Shards int
	Held   []int
}

var indexPage = page.New(`{{define "content"}}{{with .Body}}
<p>This replica is <code>{{$.Owner}}</code>. It campaigns for {{.Nets}} lease{{if ne .Nets 1}}s{{end}} and holds {{len .Held}}{{with .Groups}}, and shards of {{len .}} lease group{{if ne (len .) 1}}s{{end}}{{end}}.</p>
<h2>Its terms</h2>
{{if .Held}}<div class="scroll"><table><thead><tr><th>lease</th><th>term began</th><th>expires</th><th class="num">TTL</th></tr></thead><tbody>
{{range .Held}}<tr><td>{{.Name}}</td><td>{{when .Started}}</td><td>{{when .Expires}}</td><td class="num">{{dur .TTL}}</td></tr>
{{end}}</tbody></table></div>
{{else if not .Groups}}<p class="muted">none: another replica holds each lease, or none is elected yet.</p>{{end}}
{{range .Groups}}<p>Lease group {{.Name}}: {{len .Held}} of its {{.Shards}} shards ({{ranges .Held}}); <a href="/leases">/leases</a> lists each shard's lease.</p>
{{end}}
<h2>Pages</h2>
<ul>{{range .Links}}<li><a href="{{.Href}}">{{.Href}}</a></li>{{end}}</ul>
{{end}}{{end}}`, map[string]any{"ranges": page.Ranges})

// getLeases is GET /leases: the store's leases as a page, or with
// ?format=json as [{"name", "owner", "expires", "expired"}]; 400 for another
// format or another parameter; 501 when the store cannot list its leases.
func (s *Server) getLeases(w http.ResponseWriter, r *http.Request) {
	params := r.URL.Query()
	format := params.Get("format")
	if msg := httpjson.UnknownParam(params, "format"); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if format != "" && format != "json" && format != "html" {
		writeError(w, http.StatusBadRequest, "format "+strconv.Quote(format)+" is not json or html")
		return
	}
	rows, groups, ok := s.leaseRows(w, r)
	if !ok {
		return
	}
	if format == "json" {
		views := make([]leaseView, len(rows))
		for i, row := range rows {
			views[i] = row.leaseView
		}
		writeJSON(w, http.StatusOK, views)
		return
	}
	body := byGroup(rows, groups)
	markShardCounts(body.Groups, s.servedGroups())
	s.render(w, leasesPage, "Leases", body)
}

// servedGroups is the shard count of each lease group this replica
// serves, by name: App mode's sweeper and board groups.
func (s *Server) servedGroups() map[string]int {
	served := map[string]int{}
	if s.sweeps != nil {
		served[MergeGateSweeper().Name] = s.sweeps.shards
	}
	if s.boards != nil {
		served[ForgeBoardSync().Name] = s.boards.shards
	}
	return served
}

// markShardCounts sets, on each section, whether it is the shard count
// this replica serves its group with (served), whether nobody serves it
// (Expired), and the Others of a section somebody serves: the sections of
// the same group name with another shard count that have a live owner,
// as a group member's survey sees them (lease.GroupView.Others), so the
// page says a change of the shard count is under way, and who still
// serves the other count.
func markShardCounts(sections []groupSection, served map[string]int) {
	for i := range sections {
		g := &sections[i]
		n, ok := served[g.Name]
		g.Mine = ok && n == g.Shards
		g.Expired = !g.Mine && !g.Served()
		if g.Expired {
			continue
		}
		for _, o := range sections {
			if o.Name == g.Name && o.Shards != g.Shards && o.Served() {
				g.Others = append(g.Others, o.GroupView)
			}
		}
	}
}

// leasesBody is the /leases page: the leases of no group, then each lease
// group with its own leases, so a group of many shards does not bury the
// rest.
type leasesBody struct {
	Rows    []termRow
	Grouped int // leases of the groups, listed under each
	Groups  []groupSection
}

// groupSection is one lease group on /leases and its leases: its shards'
// and its members'.
type groupSection struct {
	lease.GroupView
	Leases []termRow
	// Mine: this replica serves the group with this shard count.
	Mine bool
	// Expired: nobody serves it, not this replica and no live member or
	// shard holder (lease.GroupView.Served): its leases all expired unreleased, as a replica
	// killed while it served this shard count leaves them (a change of
	// --sweep-shards). They stay in the store, each still its owner's to
	// renew (the lease contract), until a replica that serves this count
	// takes them; the page says so rather than show a group of no live
	// member whose every shard is unheld.
	Expired bool
}

// byGroup sorts rows into the groups' leases and the rest. A lease is a
// group's when its name is one of the group's shard names, or the member
// name of its own owner.
func byGroup(rows []termRow, groups []lease.GroupView) leasesBody {
	body := leasesBody{Groups: make([]groupSection, len(groups))}
	of := map[string]int{}
	for gi, g := range groups {
		body.Groups[gi].GroupView = g
		for i := range g.Shards {
			of[lease.ShardName(g.Name, g.Shards, i)] = gi
		}
	}
	for _, row := range rows {
		gi, ok := of[row.Name]
		for i := 0; !ok && i < len(groups); i++ {
			gi, ok = i, row.Name == lease.MemberName(groups[i].Name, groups[i].Shards, row.Owner)
		}
		if !ok {
			body.Rows = append(body.Rows, row)
			continue
		}
		body.Grouped++
		body.Groups[gi].Leases = append(body.Groups[gi].Leases, row)
	}
	return body
}

var leasesPage = page.New(`{{define "lease"}}<tr class="{{if .Self}}self{{end}}{{if .Expired}} expired{{end}}"><td>{{.Name}}</td><td><code>{{.Owner}}</code></td>
<td>{{if .Self}}{{if .Started.IsZero}}<span class="muted">not seen</span>{{else}}{{dur (age .Started $.Now)}}{{end}}{{else}}<span class="muted" title="the term began on its owner's replica">not known here</span>{{end}}</td>
<td class="num">{{if .TTL}}{{dur .TTL}}{{else}}<span class="muted">not elected here</span>{{end}}</td>
<td>{{when .Expires}}</td><td>{{if .Expired}}expired{{else if .Self}}held by this replica{{else}}held{{end}}</td></tr>
{{end}}{{define "leaseHead"}}<thead><tr><th>lease</th><th>owner</th><th>term age</th><th class="num">TTL</th><th>expires</th><th>state</th></tr></thead>{{end}}
{{define "content"}}
<p>Every lease in the store, its owner and its term{{with .Body.Grouped}}; the {{.}} leases of lease groups are listed under their group{{end}}. <a href="?format=json">JSON</a></p>
<div class="scroll"><table>{{template "leaseHead"}}<tbody>
{{range .Body.Rows}}{{template "lease" (withNow . $.Now)}}{{else}}<tr><td colspan="6">{{if .Body.Grouped}}no other leases{{else}}no leases{{end}}</td></tr>
{{end}}</tbody></table></div>
<p class="muted">A term's age is known for this replica's own terms. TTL is this replica's (the lease's intervals × its net's interval); the replicas of one deployment share it.</p>
{{with .Body.Groups}}<h2>Lease groups</h2>
<p>Each group's shards by owner: a live member's count against its share (the fair share is the most any member should hold), and the shards nobody holds.</p>
{{range .}}{{$fair := .Fair}}{{if .Expired}}<h3>{{.Name}}: {{.Shards}} shards, nobody serves it</h3>
<p class="muted">No replica serves the group with this shard count: its {{len .Leases}} lease{{if ne (len .Leases) 1}}s{{end}} expired without being released, as a replica stopped without releasing them leaves them (one killed during a change of the shard count, say). They count nowhere (<code>lease_group_other_members</code> counts live owners only) and stay in the store until a replica serving this shard count takes them.</p>
{{else}}<h3>{{.Name}}: {{.Shards}} shards, {{len .Members}} live member{{if ne (len .Members) 1}}s{{end}}, fair share {{$fair}}{{if .Mine}} (this replica's shard count){{end}}</h3>
{{if .Others}}<p class="bad">A change of the shard count is under way: the group is also served with {{range $i, $o := .Others}}{{if $i}}, {{end}}{{$o.Shards}}{{end}} shards, by {{range $i, $w := .OtherOwners}}{{if $i}}, {{end}}<code>{{$w}}</code>{{end}}. Until only one shard count has live owners, each installation is served under both; the change is done when <code>lease_group_other_members</code> is 0 on every replica.</p>
{{end}}<div class="scroll"><table><thead><tr><th>owner</th><th class="num">shards</th><th class="num">share</th><th>which</th></tr></thead><tbody>
{{range .Holdings}}<tr><td><code>{{.Owner}}</code></td><td class="num">{{len .Shards}}</td>
<td class="num">{{if .Member}}{{.Target}} of at most {{$fair}}{{else}}<span class="muted">not a live member</span>{{end}}</td><td>{{ranges .Shards}}</td></tr>
{{end}}</tbody></table></div>
<p>Unheld: {{ranges .Unheld}}</p>
{{end}}{{with .Leases}}<details><summary>its {{len .}} lease{{if ne (len .) 1}}s{{end}}, one per shard and member</summary>
<div class="scroll"><table>{{template "leaseHead"}}<tbody>
{{range .}}{{template "lease" (withNow . $.Now)}}{{end}}</tbody></table></div></details>{{end}}
{{end}}{{end}}
{{end}}`, map[string]any{"age": func(from, now time.Time) time.Duration { return now.Sub(from) }, "ranges": page.Ranges,
	"withNow": func(row termRow, now time.Time) leaseAt { return leaseAt{row, now} }})

// leaseAt is one lease row with the page's now, for the "lease" template,
// which sees no page data of its own.
type leaseAt struct {
	termRow
	Now time.Time
}
