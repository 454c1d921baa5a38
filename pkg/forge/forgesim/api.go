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

type userJSON struct {
	Login string `json:"login"`
}

type repoJSON struct {
	ID       int64    `json:"id"`
	Name     string   `json:"name"`
	FullName string   `json:"full_name"`
	Owner    userJSON `json:"owner"`
}

type refJSON struct {
	Label string `json:"label"`
	Ref   string `json:"ref"`
	SHA   string `json:"sha"`
}

type pullJSON struct {
	URL       string  `json:"url"`
	ID        int64   `json:"id"`
	Number    int     `json:"number"`
	State     string  `json:"state"`
	Title     string  `json:"title"`
	Merged    bool    `json:"merged"`
	MergedAt  *string `json:"merged_at"`
	ClosedAt  *string `json:"closed_at"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	HTMLURL   string  `json:"html_url"`
	Head      refJSON `json:"head"`
	Base      refJSON `json:"base"`
}

type statusJSON struct {
	URL         string  `json:"url"`
	ID          int64   `json:"id"`
	State       string  `json:"state"`
	Description *string `json:"description"`
	TargetURL   *string `json:"target_url"`
	Context     string  `json:"context"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
}

type combinedJSON struct {
	State      string       `json:"state"`
	Statuses   []statusJSON `json:"statuses"`
	SHA        string       `json:"sha"`
	TotalCount int          `json:"total_count"`
	Repository repoJSON     `json:"repository"`
	CommitURL  string       `json:"commit_url"`
	URL        string       `json:"url"`
}

type labelJSON struct {
	Name string `json:"name"`
}

type issuePullJSON struct {
	URL      string  `json:"url"`
	HTMLURL  string  `json:"html_url"`
	MergedAt *string `json:"merged_at"`
}

type issueJSON struct {
	URL         string         `json:"url"`
	ID          int64          `json:"id"`
	Number      int            `json:"number"`
	Title       string         `json:"title"`
	State       string         `json:"state"`
	Labels      []labelJSON    `json:"labels"`
	Assignees   []userJSON     `json:"assignees"`
	HTMLURL     string         `json:"html_url"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
	ClosedAt    *string        `json:"closed_at"`
	PullRequest *issuePullJSON `json:"pull_request,omitempty"`
}

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
	full := rp.owner + "/" + rp.name
	return jsonReply(http.StatusOK, pullJSON{
		URL:       fmt.Sprintf("%s/repos/%s/pulls/%d", apiRoot(r), full, number),
		ID:        is.id,
		Number:    number,
		State:     is.state,
		Title:     is.title,
		Merged:    !is.pull.merged.IsZero(),
		MergedAt:  optTime(is.pull.merged),
		ClosedAt:  optTime(is.closed),
		CreatedAt: ghTime(is.created),
		UpdatedAt: ghTime(is.updated),
		HTMLURL:   fmt.Sprintf("%s%s/pull/%d", htmlRoot, full, number),
		Head:      refJSON{Label: rp.owner + ":pull-" + strconv.Itoa(number), Ref: "pull-" + strconv.Itoa(number), SHA: is.pull.headSHA},
		Base:      refJSON{Label: rp.owner + ":main", Ref: "main"},
	})
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

func (s *Sim) statusJSON(r *http.Request, rp *repo, sha string, st *status) statusJSON {
	return statusJSON{
		URL:         fmt.Sprintf("%s/repos/%s/%s/statuses/%s", apiRoot(r), rp.owner, rp.name, sha),
		ID:          st.id,
		State:       st.state,
		Description: optString(st.description),
		TargetURL:   optString(st.targetURL),
		Context:     st.context,
		CreatedAt:   ghTime(st.created),
		UpdatedAt:   ghTime(st.created),
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
	out := combinedJSON{
		State:      combinedState(latest),
		Statuses:   []statusJSON{},
		SHA:        ref,
		TotalCount: len(latest),
		Repository: repoJSON{Name: rp.name, FullName: rp.owner + "/" + rp.name, Owner: userJSON{Login: rp.owner}},
		CommitURL:  fmt.Sprintf("%s/repos/%s/%s/commits/%s", apiRoot(r), rp.owner, rp.name, ref),
		URL:        fmt.Sprintf("%s/repos/%s/%s/commits/%s/status", apiRoot(r), rp.owner, rp.name, ref),
	}
	for _, st := range latest[page.from:page.to] {
		out.Statuses = append(out.Statuses, s.statusJSON(r, rp, ref, st))
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
	return jsonReply(http.StatusCreated, s.statusJSON(r, rp, sha, rec))
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
	out := []issueJSON{}
	for _, is := range list[page.from:page.to] {
		out = append(out, s.issueJSON(r, rp, is))
	}
	rep = jsonReply(http.StatusOK, out)
	rep.header = page.link(r)
	return rep
}

func (s *Sim) issueJSON(r *http.Request, rp *repo, is *issue) issueJSON {
	full := rp.owner + "/" + rp.name
	out := issueJSON{
		URL:       fmt.Sprintf("%s/repos/%s/issues/%d", apiRoot(r), full, is.number),
		ID:        is.id,
		Number:    is.number,
		Title:     is.title,
		State:     is.state,
		Labels:    []labelJSON{},
		Assignees: []userJSON{},
		HTMLURL:   fmt.Sprintf("%s%s/issues/%d", htmlRoot, full, is.number),
		CreatedAt: ghTime(is.created),
		UpdatedAt: ghTime(is.updated),
		ClosedAt:  optTime(is.closed),
	}
	for _, l := range is.labels {
		out.Labels = append(out.Labels, labelJSON{Name: l})
	}
	for _, a := range is.assignees {
		out.Assignees = append(out.Assignees, userJSON{Login: a})
	}
	if is.pull != nil {
		out.HTMLURL = fmt.Sprintf("%s%s/pull/%d", htmlRoot, full, is.number)
		out.PullRequest = &issuePullJSON{
			URL:      fmt.Sprintf("%s/repos/%s/pulls/%d", apiRoot(r), full, is.number),
			HTMLURL:  out.HTMLURL,
			MergedAt: optTime(is.pull.merged),
		}
	}
	return out
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
	if err != nil || id <= 0 {
		return notFound()
	}
	s.minted++
	token := fmt.Sprintf("ghs_sim_%d_%d", id, s.minted)
	s.installations[token] = id
	return jsonReply(http.StatusCreated, tokenJSON{
		Token:               token,
		ExpiresAt:           ghTime(s.clock().Add(s.tokenTTL)),
		Permissions:         map[string]string{"pull_requests": "read", "statuses": "write", "issues": "read"},
		RepositorySelection: "all",
	})
}
