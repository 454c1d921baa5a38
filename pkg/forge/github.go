package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"
)

// Pull is a pull request as the merge gate needs it.
type Pull struct {
	Number  int
	State   string // "open" or "closed"
	Merged  bool
	HeadSHA string
}

// Status is one commit status: a context's verdict on a commit.
type Status struct {
	Context     string
	State       string // "error", "failure", "pending" or "success"
	Description string
	TargetURL   string
}

// CombinedStatus is a ref's combined status: GitHub's overall State
// ("failure", "pending" or "success") and the latest status of each context.
type CombinedStatus struct {
	State    string
	Statuses []Status
}

// Issue is an issue or a pull request (PullRequest true) as the board sync
// needs it.
type Issue struct {
	// Repo is the "owner/name" of the repository the issue is in, from
	// its repository_url, in the forge's spelling; "" when the answer
	// lacked it.
	Repo        string
	Number      int
	Title       string
	State       string // "open" or "closed"
	Labels      []string
	Assignees   []string
	PullRequest bool
	HTMLURL     string
	UpdatedAt   time.Time
}

// perPage is the page size asked for in paginated calls: GitHub's maximum.
const perPage = 100

// ErrMalformedAnswer reports a forge answer, valid JSON, that lacks a
// field GitHub's schema requires or holds a value GitHub never gives: a
// pull request without its head commit, with a state other than open or
// closed, or with another number than the one asked for; a commit status
// without its context or state; an App installation without its id. It is
// a failed read, never a closed pull request, a moved head, a missing
// status or an installation gone, so a caller decides nothing from it.
var ErrMalformedAnswer = errors.New("forge: malformed answer")

// GetPull returns pull request number of owner/repo. An answer checkPull
// refuses fails with ErrMalformedAnswer.
func (c *Client) GetPull(ctx context.Context, owner, repo string, number int) (Pull, error) {
	op := fmt.Sprintf("GET pull %s/%s#%d", owner, repo, number)
	pr, _, err := c.gh.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return Pull{}, c.wrap(ctx, op, err)
	}
	p := Pull{
		Number:  pr.GetNumber(),
		State:   pr.GetState(),
		Merged:  pr.GetMerged(),
		HeadSHA: pr.GetHead().GetSHA(),
	}
	if err := checkPull(p, number); err != nil {
		return Pull{}, fmt.Errorf("%s: %w", op, err)
	}
	return p, nil
}

// checkStatus reports, wrapping ErrMalformedAnswer, a commit status
// without its context or with a state GitHub's statuses do not have
// (error, failure, pending, success; GraphQL's StatusState, lower-cased,
// adds expected): a gate that read it would publish its verdict again on
// every offer, up to GitHub's 1,000 statuses a context.
func checkStatus(st Status) error {
	switch {
	case st.Context == "":
		return fmt.Errorf("%w: a status without its context", ErrMalformedAnswer)
	case !slices.Contains([]string{"error", "expected", "failure", "pending", "success"}, st.State):
		return fmt.Errorf("%w: status %s: state %q, want error, expected, failure, pending or success", ErrMalformedAnswer, st.Context, st.State)
	}
	return nil
}

// checkPull reports, wrapping ErrMalformedAnswer and naming the field,
// what makes p unusable as GitHub's answer for pull request number: the
// REST schema's pull-request requires number, state (open or closed) and
// head.sha, as GraphQL's PullRequest has number, state and a non-null
// headRefOid (@octokit/openapi, octokit/graphql-schema). Without that
// check an answer missing them reads as a closed pull request or a moved
// head, and its run would be settled, never repaired.
func checkPull(p Pull, number int) error {
	switch {
	case p.Number != number:
		return fmt.Errorf("%w: number %d, asked for %d", ErrMalformedAnswer, p.Number, number)
	case p.State != "open" && p.State != "closed":
		return fmt.Errorf("%w: state %q, want open or closed", ErrMalformedAnswer, p.State)
	case p.HeadSHA == "":
		return fmt.Errorf("%w: the head commit's sha is missing", ErrMalformedAnswer)
	}
	return nil
}

// CombinedStatus returns the combined status of ref (a SHA, branch or tag)
// in owner/repo, every page of its statuses included. A status checkStatus
// refuses fails the call with ErrMalformedAnswer.
func (c *Client) CombinedStatus(ctx context.Context, owner, repo, ref string) (CombinedStatus, error) {
	var out CombinedStatus
	opts := &github.ListOptions{PerPage: perPage}
	for {
		cs, resp, err := c.gh.Repositories.GetCombinedStatus(ctx, owner, repo, ref, opts)
		if err != nil {
			return CombinedStatus{}, c.wrap(ctx, fmt.Sprintf("GET combined status %s/%s@%s", owner, repo, ref), err)
		}
		out.State = cs.GetState()
		for _, s := range cs.Statuses {
			st := Status{
				Context:     s.GetContext(),
				State:       s.GetState(),
				Description: s.GetDescription(),
				TargetURL:   s.GetTargetURL(),
			}
			if err := checkStatus(st); err != nil {
				return CombinedStatus{}, fmt.Errorf("GET combined status %s/%s@%s: %w", owner, repo, ref, err)
			}
			out.Statuses = append(out.Statuses, st)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// CreateStatus sets st on commit sha of owner/repo. An empty st.Context is
// GitHub's "default".
func (c *Client) CreateStatus(ctx context.Context, owner, repo, sha string, st Status) error {
	rs := github.RepoStatus{State: github.Ptr(st.State)}
	if st.Context != "" {
		rs.Context = github.Ptr(st.Context)
	}
	if st.Description != "" {
		rs.Description = github.Ptr(st.Description)
	}
	if st.TargetURL != "" {
		rs.TargetURL = github.Ptr(st.TargetURL)
	}
	if _, _, err := c.gh.Repositories.CreateStatus(ctx, owner, repo, sha, rs); err != nil {
		return c.wrap(ctx, fmt.Sprintf("POST status %s/%s@%s", owner, repo, sha), err)
	}
	return nil
}

// GetIssue returns issue (or pull request) number of owner/repo. GitHub
// answers an issue transferred to another repository 301 Moved
// Permanently to its new address, which the client follows: the Issue's
// Repo is then another repository than owner/repo. A deleted issue is
// ErrGone (410), or ErrNotFound (404) where the token cannot read the
// repository it was deleted from or transferred to
// (https://docs.github.com/rest/issues/issues#get-an-issue). An answer
// without its repository_url fails with ErrMalformedAnswer.
func (c *Client) GetIssue(ctx context.Context, owner, repo string, number int) (Issue, error) {
	op := fmt.Sprintf("GET issue %s/%s#%d", owner, repo, number)
	is, _, err := c.gh.Issues.Get(ctx, owner, repo, number)
	if err != nil {
		return Issue{}, c.wrap(ctx, op, err)
	}
	out := issueOf(is)
	if out.Repo == "" {
		return Issue{}, fmt.Errorf("%s: %w: repository_url %q names no repository", op, ErrMalformedAnswer, is.GetRepositoryURL())
	}
	return out, nil
}

// repoOfURL is the "owner/name" of a repository's API URL
// (".../repos/owner/name"), or "" when u is not one.
func repoOfURL(u string) string {
	_, full, ok := strings.Cut(u, "/repos/")
	if _, _, err := ParseRepo(full); !ok || err != nil {
		return ""
	}
	return full
}

// ListIssues returns every issue and pull request of owner/repo, open or
// closed, updated at or after since (zero: all), following every page,
// most recently updated first. In that order an issue updated while the
// pages are read moves to the first page, already read, so the later pages
// show nothing updated after the first page was read.
func (c *Client) ListIssues(ctx context.Context, owner, repo string, since time.Time) ([]Issue, error) {
	opts := &github.IssueListByRepoOptions{
		State:       "all",
		Sort:        "updated",
		Direction:   "desc",
		Since:       since,
		ListOptions: github.ListOptions{PerPage: perPage},
	}
	var out []Issue
	for {
		page, resp, err := c.gh.Issues.ListByRepo(ctx, owner, repo, opts)
		if err != nil {
			return nil, c.wrap(ctx, fmt.Sprintf("GET issues %s/%s", owner, repo), err)
		}
		for _, is := range page {
			out = append(out, issueOf(is))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}

func issueOf(is *github.Issue) Issue {
	out := Issue{
		Repo:        repoOfURL(is.GetRepositoryURL()),
		Number:      is.GetNumber(),
		Title:       is.GetTitle(),
		State:       is.GetState(),
		PullRequest: is.IsPullRequest(),
		HTMLURL:     is.GetHTMLURL(),
		UpdatedAt:   is.GetUpdatedAt().Time,
	}
	for _, l := range is.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	for _, a := range is.Assignees {
		out.Assignees = append(out.Assignees, a.GetLogin())
	}
	return out
}

// wrap turns go-github's errors into this package's: rate limits into a
// *RateLimitError, 404 into ErrNotFound, 410 into ErrGone, another 403
// into ErrForbidden, a 5xx into ErrServer; op names the call.
func (c *Client) wrap(ctx context.Context, op string, err error) error {
	var held *RateLimitError
	if errors.As(err, &held) {
		return fmt.Errorf("%s: %w", op, held)
	}
	// A primary limit's x-ratelimit-reset is on GitHub's clock: a replica
	// whose clock runs ahead can read it as past, and its gate would then
	// let the next request through to be refused again, at once, for as
	// long as the clocks differ. holdSpent holds the resource back until
	// the reset, and a minute at least.
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		until, _ := c.gate.holdSpent(primary.Rate.Resource)
		return fmt.Errorf("%s: %w", op, &RateLimitError{
			Reset: until, Cause: CausePrimary, Sent: true, Lane: laneOf(ctx),
			Resource: primary.Rate.Resource, Limit: primary.Rate.Limit, Remaining: primary.Rate.Remaining,
		})
	}
	// go-github knows a secondary limit by its documentation URL; the gate
	// by retry-after, GitHub's message and that URL, and has started
	// backing off.
	var secondary *github.AbuseRateLimitError
	var resp *github.ErrorResponse
	if errors.As(err, &secondary) || (errors.As(err, &resp) && resp.Response != nil &&
		(resp.Response.StatusCode == http.StatusForbidden || resp.Response.StatusCode == http.StatusTooManyRequests) &&
		c.gate.secondaryUntil().After(c.gate.now())) {
		return fmt.Errorf("%s: %w", op, &RateLimitError{
			Reset: c.gate.secondaryUntil(), Cause: CauseSecondary, Sent: true, Lane: laneOf(ctx),
		})
	}
	if errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == http.StatusNotFound {
		return fmt.Errorf("forge: %s: %w: %w", op, ErrNotFound, err)
	}
	if errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == http.StatusGone {
		return fmt.Errorf("forge: %s: %w: %w", op, ErrGone, err)
	}
	if errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode == http.StatusForbidden {
		return fmt.Errorf("forge: %s: %w: %w", op, ErrForbidden, err)
	}
	if errors.As(err, &resp) && resp.Response != nil && resp.Response.StatusCode >= 500 {
		return fmt.Errorf("forge: %s: %w: %w", op, ErrServer, err)
	}
	return fmt.Errorf("forge: %s: %w", op, err)
}
