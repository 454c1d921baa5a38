package forgesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The GitHub endpoints. Each runs with s.mu held and returns GitHub's JSON.

const htmlRoot = "https://github.com/"

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := ghTime(t)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// apiRoot is the URL the request reached the simulator at, for the url
// fields and Link headers.
func apiRoot(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func notFound() reply { return errorReply(http.StatusNotFound, "Not Found") }

func (s *Sim) getPull(r *http.Request, _ string) reply {
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil {
		return notFound()
	}
	rp, is, err := s.pullFor(r.PathValue("owner"), r.PathValue("repo"), number)
	if err != nil {
		return notFound()
	}
	rep := jsonReply(http.StatusOK, s.pullJSON(r, rp, is))
	rep.reads = []pullRef{{repo: rp.owner + "/" + rp.name, number: is.number}}
	return rep
}

// pullJSON is GitHub's pull-request for is of rp. The head branch is
// pull-<number> of the same repository; the base is the default branch.
func (s *Sim) pullJSON(r *http.Request, rp *repo, is *issue) object {
	full := rp.owner + "/" + rp.name
	api := fmt.Sprintf("%s/repos/%s", apiRoot(r), full)
	self := fmt.Sprintf("%s/pulls/%d", api, is.number)
	html := fmt.Sprintf("%s%s/pull/%d", htmlRoot, full, is.number)
	issueURL := fmt.Sprintf("%s/issues/%d", api, is.number)
	owner := userJSON(r, rp.owner)
	repoObj := s.repoJSON(r, rp)
	head := "pull-" + strconv.Itoa(is.number)
	merged := !is.pull.merged.IsZero()
	var mergedBy, mergeSHA any
	mergeable, mergeableState := any(true), "clean"
	if merged {
		mergedBy = owner
		mergeSHA = commitSHA(full + "#" + strconv.Itoa(is.number) + " merged")
	}
	if is.state == "closed" {
		mergeable, mergeableState = nil, "unknown"
	}
	link := func(href string) object { return object{"href": href} }
	out := s.issueFields(r, rp, is)
	pullFields := object{
		"url": self, "html_url": html, "issue_url": issueURL,
		"diff_url": html + ".diff", "patch_url": html + ".patch",
		"commits_url": self + "/commits", "review_comments_url": self + "/comments",
		"review_comment_url": api + "/pulls/comments{/number}", "comments_url": issueURL + "/comments",
		"statuses_url": api + "/statuses/" + is.pull.headSHA, "node_id": nodeID("PR", is.id),
		"user": owner, "body": nil, "author_association": "OWNER", "auto_merge": nil,
		"active_lock_reason": nil, "draft": false, "requested_reviewers": []object{}, "requested_teams": []object{},
		"merged": merged, "merged_at": optTime(is.pull.merged), "merged_by": mergedBy, "merge_commit_sha": mergeSHA,
		"mergeable": mergeable, "rebaseable": mergeable, "mergeable_state": mergeableState, "maintainer_can_modify": false,
		"comments": 0, "review_comments": 0, "commits": 1, "additions": 0, "deletions": 0, "changed_files": 0,
		"head": object{"label": rp.owner + ":" + head, "ref": head, "sha": is.pull.headSHA, "user": owner, "repo": repoObj},
		"base": object{"label": rp.owner + ":" + defaultBranch, "ref": defaultBranch, "sha": rp.baseSHA(), "user": owner, "repo": repoObj},
		"_links": object{
			"self": link(self), "html": link(html), "issue": link(issueURL), "comments": link(issueURL + "/comments"),
			"review_comments": link(self + "/comments"), "review_comment": link(api + "/pulls/comments{/number}"),
			"commits": link(self + "/commits"), "statuses": link(api + "/statuses/" + is.pull.headSHA),
		},
	}
	for k, v := range pullFields {
		out[k] = v
	}
	delete(out, "pull_request")
	delete(out, "repository_url")
	delete(out, "labels_url")
	delete(out, "events_url")
	return out
}

// combinedState is GitHub's rule: failure if any context's latest status is
// error or failure; pending if there are none or any is pending; success
// when every one is success.
func combinedState(latest []*status) string {
	state := "success"
	if len(latest) == 0 {
		state = "pending"
	}
	for _, st := range latest {
		switch st.state {
		case "error", "failure":
			return "failure"
		case "pending":
			state = "pending"
		}
	}
	return state
}

// latestByContext keeps the latest status of each context, newest first.
// Contexts compare case-insensitively: the statuses endpoint's context
// "field is case-insensitive" (Create a commit status:
// https://docs.github.com/rest/commits/statuses#create-a-commit-status).
func latestByContext(all []*status) []*status {
	seen := make(map[string]bool)
	var out []*status
	for i := len(all) - 1; i >= 0; i-- {
		if st := all[i]; !seen[strings.ToLower(st.context)] {
			seen[strings.ToLower(st.context)] = true
			out = append(out, st)
		}
	}
	return out
}

// statusJSON is GitHub's status for st on sha of rp; GitHub's
// simple-commit-status of a combined status is the same less creator.
func (s *Sim) statusJSON(r *http.Request, rp *repo, sha string, st *status) object {
	creator := userJSON(r, rp.owner)
	return object{
		"url":         fmt.Sprintf("%s/repos/%s/%s/statuses/%s", apiRoot(r), rp.owner, rp.name, sha),
		"avatar_url":  creator["avatar_url"],
		"id":          st.id,
		"node_id":     nodeID("SC", st.id),
		"state":       st.state,
		"description": optString(st.description),
		"target_url":  optString(st.targetURL),
		"context":     st.context,
		"created_at":  ghTime(st.created),
		"updated_at":  ghTime(st.created),
		"creator":     creator,
	}
}

func (s *Sim) getCombinedStatus(r *http.Request, _ string) reply {
	rp := s.repoFor(r.PathValue("owner"), r.PathValue("repo"), false)
	if rp == nil {
		return notFound()
	}
	ref, ok := rp.resolve(r.PathValue("ref"))
	if !ok {
		return errorReply(http.StatusNotFound, "No commit found for SHA: "+r.PathValue("ref"))
	}
	latest := latestByContext(rp.statuses[ref])
	page, rep := paginate(r, len(latest))
	if rep.status != 0 {
		return rep
	}
	statuses := []object{}
	for _, st := range latest[page.from:page.to] {
		one := s.statusJSON(r, rp, ref, st)
		delete(one, "creator")
		statuses = append(statuses, one)
	}
	out := object{
		"state":       combinedState(latest),
		"statuses":    statuses,
		"sha":         ref,
		"total_count": len(latest),
		"repository":  s.repoJSON(r, rp),
		"commit_url":  fmt.Sprintf("%s/repos/%s/%s/commits/%s", apiRoot(r), rp.owner, rp.name, ref),
		"url":         fmt.Sprintf("%s/repos/%s/%s/commits/%s/status", apiRoot(r), rp.owner, rp.name, ref),
	}
	rep = jsonReply(http.StatusOK, out)
	rep.header = page.link(r)
	return rep
}

func (s *Sim) createStatus(r *http.Request, _ string) reply {
	rp := s.repoFor(r.PathValue("owner"), r.PathValue("repo"), false)
	sha := r.PathValue("sha")
	if rp == nil {
		return notFound()
	}
	var st Status
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return errorReply(http.StatusBadRequest, "Problems parsing JSON")
	}
	if !rp.commits[sha] {
		return validationFailed("No commit found for SHA: " + sha)
	}
	rec, err := s.addStatus(rp, sha, st)
	if err != nil {
		return validationFailed(err.Error())
	}
	body := s.statusJSON(r, rp, sha, rec)
	rep := jsonReply(http.StatusCreated, body)
	// A created resource is named by Location, as GitHub's description of
	// Create a commit status declares for its 201
	// (https://docs.github.com/rest/commits/statuses#create-a-commit-status).
	rep.header = http.Header{"Location": {body["url"].(string)}}
	return rep
}

func validationFailed(msg string) reply {
	return jsonReply(http.StatusUnprocessableEntity, githubError{Message: "Validation Failed: " + msg, DocumentationURL: "https://docs.github.com/rest"})
}

func (s *Sim) listIssues(r *http.Request, _ string) reply {
	rp := s.repoFor(r.PathValue("owner"), r.PathValue("repo"), false)
	if rp == nil {
		return notFound()
	}
	q := r.URL.Query()
	state := cmp.Or(q.Get("state"), "open")
	if !slices.Contains([]string{"open", "closed", "all"}, state) {
		return validationFailed("state: " + state)
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return validationFailed("since: " + v)
		}
		since = t
	}
	var list []*issue
	for _, is := range rp.issues {
		// "Only show results that were last updated after the given
		// time" (List repository issues, parameter since:
		// https://docs.github.com/rest/issues/issues#list-repository-issues):
		// after, so an issue updated at since itself is not listed.
		if (state == "all" || is.state == state) && is.updated.After(since) {
			list = append(list, is)
		}
	}
	byUpdated := q.Get("sort") == "updated"
	asc := q.Get("direction") == "asc"
	slices.SortFunc(list, func(a, b *issue) int {
		c := cmp.Compare(a.number, b.number) // created order
		if byUpdated {
			c = cmp.Or(a.updated.Compare(b.updated), c)
		}
		if !asc {
			c = -c
		}
		return c
	})
	page, rep := paginate(r, len(list))
	if rep.status != 0 {
		return rep
	}
	out := []object{}
	for _, is := range list[page.from:page.to] {
		out = append(out, s.issueJSON(r, rp, is))
	}
	rep = jsonReply(http.StatusOK, out)
	rep.header = page.link(r)
	return rep
}

// getIssue answers GET /repos/{owner}/{repo}/issues/{number} as GitHub's
// Get an issue does (https://docs.github.com/rest/issues/issues#get-an-issue):
// the issue or pull request, 301 with Location its new address when it was
// transferred, 410 Gone when it was deleted, 404 when there never was one.
func (s *Sim) getIssue(r *http.Request, _ string) reply {
	number, err := strconv.Atoi(r.PathValue("number"))
	if err != nil {
		return notFound()
	}
	rp := s.repoFor(r.PathValue("owner"), r.PathValue("repo"), false)
	if rp == nil {
		return notFound()
	}
	if is := rp.issues[number]; is != nil {
		return jsonReply(http.StatusOK, s.issueJSON(r, rp, is))
	}
	g, ok := rp.gone[number]
	switch {
	case !ok:
		return notFound()
	case g.to == nil:
		return errorReply(http.StatusGone, "This issue was deleted")
	}
	to := fmt.Sprintf("%s/repos/%s/%s/issues/%d", apiRoot(r), g.to.owner, g.to.name, g.number)
	rep := jsonReply(http.StatusMovedPermanently, object{"message": "Moved Permanently", "url": to, "documentation_url": "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects"})
	rep.header = http.Header{"Location": {to}}
	return rep
}

// issueJSON is GitHub's issue for is of rp; a pull request's carries
// pull_request.
func (s *Sim) issueJSON(r *http.Request, rp *repo, is *issue) object {
	out := s.issueFields(r, rp, is)
	if is.pull != nil {
		full := rp.owner + "/" + rp.name
		html := fmt.Sprintf("%s%s/pull/%d", htmlRoot, full, is.number)
		out["html_url"] = html
		out["pull_request"] = object{
			"url":      fmt.Sprintf("%s/repos/%s/pulls/%d", apiRoot(r), full, is.number),
			"html_url": html, "diff_url": html + ".diff", "patch_url": html + ".patch",
			"merged_at": optTime(is.pull.merged),
		}
	}
	return out
}

// issueFields are the fields an issue and a pull request share.
func (s *Sim) issueFields(r *http.Request, rp *repo, is *issue) object {
	full := rp.owner + "/" + rp.name
	api := fmt.Sprintf("%s/repos/%s", apiRoot(r), full)
	self := fmt.Sprintf("%s/issues/%d", api, is.number)
	labels := []object{}
	for _, l := range is.labels {
		labels = append(labels, labelJSON(r, rp, l))
	}
	assignees := []object{}
	var assignee any
	for _, a := range is.assignees {
		assignees = append(assignees, userJSON(r, a))
	}
	if len(assignees) > 0 {
		assignee = assignees[0]
	}
	var closedBy any
	if !is.closed.IsZero() {
		closedBy = userJSON(r, rp.owner)
	}
	return object{
		"url": self, "id": is.id, "node_id": nodeID("I", is.id), "number": is.number,
		"repository_url": api, "labels_url": self + "/labels{/name}", "comments_url": self + "/comments",
		"events_url": self + "/events", "html_url": fmt.Sprintf("%s%s/issues/%d", htmlRoot, full, is.number),
		"title": is.title, "state": is.state, "locked": false, "user": userJSON(r, rp.owner),
		"labels": labels, "assignee": assignee, "assignees": assignees, "milestone": nil,
		"comments": 0, "created_at": ghTime(is.created), "updated_at": ghTime(is.updated),
		"closed_at": optTime(is.closed), "closed_by": closedBy, "author_association": "OWNER", "body": nil,
	}
}

// pageSpan is one page of a list: items [from, to) of total.
type pageSpan struct {
	page, perPage, last int
	from, to            int
}

// paginate reads per_page (default 30, at most 100) and page (default 1);
// a bad value answers 422.
func paginate(r *http.Request, total int) (pageSpan, reply) {
	q := r.URL.Query()
	p := pageSpan{page: 1, perPage: 30}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, validationFailed("per_page: " + v)
		}
		p.perPage = min(n, 100)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, validationFailed("page: " + v)
		}
		p.page = n
	}
	p.last = max(1, (total+p.perPage-1)/p.perPage)
	p.from = min((p.page-1)*p.perPage, total)
	p.to = min(p.from+p.perPage, total)
	return p, reply{}
}

// link is GitHub's Link header for p: next and last while there is a next
// page, first and prev after the first.
func (p pageSpan) link(r *http.Request) http.Header {
	ref := func(page int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page))
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		return "<" + apiRoot(r) + u.String() + `>; rel="` + rel + `"`
	}
	var rels []string
	if p.page > 1 {
		rels = append(rels, ref(p.page-1, "prev"), ref(1, "first"))
	}
	if p.page < p.last {
		rels = append(rels, ref(p.page+1, "next"), ref(p.last, "last"))
	}
	if len(rels) == 0 {
		return nil
	}
	return http.Header{"Link": {strings.Join(rels, ", ")}}
}

type tokenJSON struct {
	Token               string            `json:"token"`
	ExpiresAt           string            `json:"expires_at"`
	Permissions         map[string]string `json:"permissions"`
	RepositorySelection string            `json:"repository_selection"`
}

func (s *Sim) createInstallationToken(r *http.Request, tok string) reply {
	if !strings.HasPrefix(tok, "app:") {
		return errorReply(http.StatusUnauthorized, "A JSON web token could not be decoded")
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 || !s.mintable(id) {
		return notFound()
	}
	if in := s.apps[id]; in != nil && !in.suspended.IsZero() {
		return mintRefusal()
	}
	if in := s.apps[id]; in != nil && in.refuseMints {
		return mintForbidden()
	}
	s.minted++
	token := fmt.Sprintf("ghs_sim_%d_%d", id, s.minted)
	// The expiry to the second, as expires_at gives it: the token works
	// until the time the client was told.
	expires := s.clock().Add(s.tokenTTL).Truncate(time.Second)
	s.installations[token] = mintedToken{installation: id, expires: expires}
	return jsonReply(http.StatusCreated, tokenJSON{
		Token:               token,
		ExpiresAt:           ghTime(expires),
		Permissions:         map[string]string{"pull_requests": "read", "statuses": "write", "issues": "read"},
		RepositorySelection: "all",
	})
}
