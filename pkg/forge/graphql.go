package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/shurcooL/githubv4"
)

// ErrForbidden is wrapped when the forge refuses to show something for want
// of permission: a 403 that is not a rate limit (REST, or a whole GraphQL
// query), or a GraphQL FORBIDDEN error (one pull request of a batch).
var ErrForbidden = errors.New("forge: forbidden")

// ErrInvalidArgument is wrapped when a call's argument is unusable; the
// error names it.
var ErrInvalidArgument = errors.New("forge: invalid argument")

// ErrEmptyAnswer reports a GraphQL answer that says nothing of what was
// asked: no data and no errors, or a null with no error to explain it. It
// is a failed read, never ErrNotFound.
var ErrEmptyAnswer = errors.New("forge: empty GraphQL answer")

// ErrQueryTimeout is wrapped when a GraphQL query took too long: GitHub
// stopped it (502 or 504, beside ErrServer) or the Client's request timeout
// ran out. GitHub stops a query after 10 seconds and still charges its
// points ("Rate limits and query limits for the GraphQL API", Timeouts:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts);
// a smaller query may pass.
var ErrQueryTimeout = errors.New("forge: query timed out")

// isTimeout reports whether err is a transport timeout (net.Error).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ErrStaleHead is a PullState's Err when the commit GitHub gave statuses
// for is not the pull request's head: its statuses are not taken, and the
// pull request is neither found nor missing (read it again later).
var ErrStaleHead = errors.New("forge: statuses are not the head's")

// GraphQLCPUPerMinute is GitHub's secondary limit on GraphQL time: "No
// more than 60 seconds of this CPU time may be for the GraphQL API", per
// 60 seconds of real time, estimated by response time ("Rate limits for
// the REST API", About secondary rate limits:
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
const GraphQLCPUPerMinute = 60 * time.Second

// MaxPullBatch is the most pull requests PullStates reads in one query:
// GitHub's page limit, which keeps the query at one point.
const MaxPullBatch = 100

// PullRef names one pull request.
type PullRef struct {
	Owner, Repo string
	Number      int
}

// PullState is one pull request of a PullStates batch: the pull request and
// the latest status of each context on its head commit (Description and
// TargetURL are not read), or Err when that pull request could not be read.
type PullState struct {
	Pull     Pull
	Statuses []Status
	// Err, when set, is this pull request's own failure: it wraps
	// ErrNotFound (GraphQL NOT_FOUND) or ErrForbidden (FORBIDDEN), or is
	// another error GitHub reported for it. The batch's other entries stand.
	Err error
}

// graphqlURL is the GraphQL endpoint beside the REST root base: GitHub's
// https://api.github.com/graphql, an Enterprise server's /api/graphql
// beside its /api/v3/, a simulator's /graphql.
func graphqlURL(base string) string {
	if root, ok := strings.CutSuffix(base, "/api/v3/"); ok {
		return root + "/api/graphql"
	}
	return base + "graphql"
}

// graphqlPath is the path of graphqlURL(base), which tells a client's
// GraphQL requests from its REST ones (apiOf) under any REST root: GitHub's
// /graphql, an Enterprise server's /api/graphql, /prefix/graphql behind a
// proxy. base is a REST root baseURLOf accepted, so it parses.
func graphqlPath(base string) string {
	u, _ := url.Parse(graphqlURL(base))
	return u.Path
}

// gqlPull is the part of GitHub's PullRequest a batch reads (field names
// from GitHub's public schema, octokit/graphql-schema).
type gqlPull struct {
	Number     int
	State      string
	Merged     bool
	HeadRefOid string
	Commits    struct {
		Nodes []struct {
			Commit struct {
				Oid    string
				Status *struct {
					Contexts []struct {
						Context string
						State   string
					}
				}
			}
		}
	} `graphql:"commits(last: 1)"`
}

// PullStates reads up to MaxPullBatch pull requests, each with its head
// commit's statuses, in one GraphQL query through githubv4 (one alias per
// pull request; GitHub prices it at one point), charged to the lane in ctx
// like any request, with its points added to the counts (Count.Points).
// The answer has one PullState per ref, in order.
//
// A pull request that cannot be read fails alone, in its PullState.Err. The
// call fails as a whole on a transport error, a refusal (an error that
// errors.As finds a *RateLimitError in, for GitHub's RATE_LIMITED answer as
// for a request the gate held back; after a RATE_LIMITED answer every
// query is held back until that error's Reset), or a malformed answer;
// more than MaxPullBatch refs, or none, wrap ErrInvalidArgument.
func (c *Client) PullStates(ctx context.Context, refs []PullRef) ([]PullState, error) {
	if len(refs) == 0 || len(refs) > MaxPullBatch {
		return nil, fmt.Errorf("%w: refs: %d pull requests, want 1 to %d", ErrInvalidArgument, len(refs), MaxPullBatch)
	}
	op := fmt.Sprintf("GraphQL %d pull requests", len(refs))
	q := batchQuery(refs)
	var got captured
	hc := &http.Client{Transport: &captureTransport{next: c.http.Transport, into: &got}, Timeout: c.http.Timeout}
	err := githubv4.NewEnterpriseClient(c.graphqlURL, hc).Query(ctx, q.Interface(), nil)
	if got.status != http.StatusOK {
		return nil, c.wrapGraphQL(ctx, op, err, got)
	}
	// githubv4 reports GraphQL errors by message alone; their type and path
	// say which alias failed and why, so they are read from the body.
	var body struct {
		Data   json.RawMessage
		Errors []struct {
			Type    string
			Path    []any
			Message string
		}
	}
	if jerr := json.Unmarshal(got.body, &body); jerr != nil {
		return nil, fmt.Errorf("forge: %s: %w", op, jerr)
	}
	if err != nil && len(body.Errors) == 0 {
		return nil, fmt.Errorf("forge: %s: %w", op, err)
	}
	// A GraphQL answer holds data, errors or both
	// (https://spec.graphql.org/October2021/#sec-Response-Format); one
	// with neither says nothing of any pull request, so it is an error,
	// never "not found".
	if len(body.Errors) == 0 && (len(body.Data) == 0 || string(body.Data) == "null") {
		return nil, fmt.Errorf("forge: %s: %w: the answer holds neither data nor errors", op, ErrEmptyAnswer)
	}
	out := make([]PullState, len(refs))
	for _, e := range body.Errors {
		// GitHub's type is RATE_LIMITED, but it has been seen answering
		// RATE_LIMIT (code graphql_rate_limit) for a spent budget too
		// (yanyongyu/githubkit#271, fixed by #272;
		// octokit/plugin-throttling.js#824, fix proposed in #848).
		if e.Type == "RATE_LIMITED" || e.Type == "RATE_LIMIT" {
			return nil, fmt.Errorf("%s: %w", op, c.graphqlLimited(ctx))
		}
		if isSecondaryMessage(e.Message) {
			// GitHub may answer a secondary limit on GraphQL with 200 and
			// the limit's message ("Rate limits and query limits for the
			// GraphQL API", Exceeding the rate limit:
			// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#exceeding-the-rate-limit):
			// the gate backs off as from a 403.
			until := c.gate.noteSecondary(got.header)
			return nil, fmt.Errorf("%s: %w", op, &RateLimitError{Reset: until, Cause: CauseSecondary, Sent: true, Lane: laneOf(ctx), Resource: "graphql"})
		}
		i := aliasIndex(e.Path, len(refs))
		if i < 0 {
			return nil, fmt.Errorf("forge: %s: %s (%s)", op, e.Message, e.Type)
		}
		var kind error
		switch e.Type {
		case "NOT_FOUND":
			kind = ErrNotFound
		case "FORBIDDEN":
			kind = ErrForbidden
		default:
			out[i].Err = fmt.Errorf("forge: %s: %s: %s (%s)", op, refs[i], e.Message, e.Type)
			continue
		}
		out[i].Err = fmt.Errorf("forge: %s: %s: %w: %s", op, refs[i], kind, e.Message)
	}
	v := q.Elem()
	for i := range refs {
		repo := v.Field(i)
		if out[i].Err != nil {
			continue
		}
		if repo.IsNil() || repo.Elem().Field(0).IsNil() {
			// GitHub answers a missing repository or pull request with a
			// NOT_FOUND error beside the null, read above; a null that no
			// error explains is not a "not found".
			out[i].Err = fmt.Errorf("forge: %s: %s: %w: no pull request and no error in the answer", op, refs[i], ErrEmptyAnswer)
			continue
		}
		out[i] = pullStateOf(repo.Elem().Field(0).Interface().(*gqlPull), refs[i].Number)
	}
	if cost := v.Field(len(refs)).Field(0).Int(); cost > 0 {
		c.counting.chargePoints(got.host, laneOf(ctx), c.installation, cost)
	}
	return out, nil
}

// String names the pull request as owner/repo#number.
func (r PullRef) String() string { return r.Owner + "/" + r.Repo + "#" + strconv.Itoa(r.Number) }

// batchQuery builds the query struct githubv4 sends for refs: a field
// pN: repository(owner, name) { pullRequest(number) { … } } per ref, then
// rateLimit { cost }. Names are inlined as literals; GitHub's owner and
// repository names need no escaping beyond Go's quoting.
func batchQuery(refs []PullRef) reflect.Value {
	fields := make([]reflect.StructField, 0, len(refs)+1)
	for i, r := range refs {
		repo := reflect.StructOf([]reflect.StructField{{
			Name: "PullRequest",
			Type: reflect.TypeFor[*gqlPull](),
			Tag:  reflect.StructTag(`graphql:"pullRequest(number: ` + strconv.Itoa(r.Number) + `)"`),
		}})
		tag := fmt.Sprintf("p%d: repository(owner: %s, name: %s)", i, strconv.Quote(r.Owner), strconv.Quote(r.Repo))
		fields = append(fields, reflect.StructField{
			Name: "P" + strconv.Itoa(i),
			Type: reflect.PointerTo(repo),
			Tag:  reflect.StructTag(`graphql:` + strconv.Quote(tag)),
		})
	}
	fields = append(fields, reflect.StructField{
		Name: "RateLimit",
		Type: reflect.TypeFor[struct{ Cost int }](),
	})
	return reflect.New(reflect.StructOf(fields))
}

// aliasIndex is the ref an error path starts at (alias pN), or -1.
func aliasIndex(path []any, n int) int {
	if len(path) == 0 {
		return -1
	}
	s, _ := path[0].(string)
	i, err := strconv.Atoi(strings.TrimPrefix(s, "p"))
	if !strings.HasPrefix(s, "p") || err != nil || i < 0 || i >= n {
		return -1
	}
	return i
}

// pullStateOf turns GitHub's answer for pull request number into a
// PullState, in REST's spelling: state open or closed (GraphQL's MERGED is
// closed and merged), status states in lower case. An answer that
// checkPull refuses (a state GraphQL's PullRequestState does not have is
// left as it came, so checkPull names it) or with a status checkStatus
// refuses is the PullState's Err, wrapping ErrMalformedAnswer.
func pullStateOf(p *gqlPull, number int) PullState {
	st := PullState{Pull: Pull{Number: p.Number, State: p.State, Merged: p.Merged, HeadSHA: p.HeadRefOid}}
	switch p.State {
	case "OPEN":
		st.Pull.State = "open"
	case "CLOSED", "MERGED":
		st.Pull.State = "closed"
	}
	if err := checkPull(st.Pull, number); err != nil {
		return PullState{Err: fmt.Errorf("forge: pull request #%d: %w", number, err)}
	}
	for _, n := range p.Commits.Nodes {
		if n.Commit.Oid != p.HeadRefOid {
			// commits(last: 1) can lag a push: statuses of another commit
			// say nothing of the head, so none are taken.
			st.Err = fmt.Errorf("forge: pull request #%d: %w: last commit %s, head %s", p.Number, ErrStaleHead, n.Commit.Oid, p.HeadRefOid)
			return st
		}
		if n.Commit.Status == nil {
			continue
		}
		for _, sc := range n.Commit.Status.Contexts {
			s := Status{Context: sc.Context, State: strings.ToLower(sc.State)}
			if err := checkStatus(s); err != nil {
				return PullState{Err: fmt.Errorf("forge: pull request #%d: %w", number, err)}
			}
			st.Statuses = append(st.Statuses, s)
		}
	}
	return st
}

// graphqlLimited is the error of GitHub's refusal of a query for the
// primary limit, and holds GraphQL back until the error's Reset: the
// budget's reset the answer's headers gave, or a minute from now when
// they gave none ahead. It holds whatever x-ratelimit-remaining said:
// GitHub answers RATE_LIMITED with points left, to a query that costs
// more than is left (octokit/plugin-throttling.js#632, #636).
func (c *Client) graphqlLimited(ctx context.Context) *RateLimitError {
	until, rl := c.gate.holdSpent("graphql")
	return &RateLimitError{Reset: until, Cause: CausePrimary, Sent: true, Lane: laneOf(ctx),
		Resource: "graphql", Limit: rl.Limit, Remaining: rl.Remaining}
}

// wrapGraphQL turns a query that got no 200 into this package's errors: a
// request the gate held back, a rate limit (a secondary one, which the
// gate learnt from the answer, or the primary one: 403 or 429 with
// x-ratelimit-remaining 0), another 403 (ErrForbidden), a 5xx, as the
// REST calls' wrap does.
func (c *Client) wrapGraphQL(ctx context.Context, op string, err error, got captured) error {
	var held *RateLimitError
	limited := got.status == http.StatusForbidden || got.status == http.StatusTooManyRequests
	switch {
	case errors.As(err, &held):
		return fmt.Errorf("%s: %w", op, held)
	case limited && c.gate.secondaryUntil().After(c.gate.now()):
		return fmt.Errorf("%s: %w", op, &RateLimitError{Reset: c.gate.secondaryUntil(), Cause: CauseSecondary, Sent: true, Lane: laneOf(ctx)})
	case limited && got.header.Get("X-Ratelimit-Remaining") == "0":
		return fmt.Errorf("%s: %w", op, c.graphqlLimited(ctx))
	case got.status == http.StatusForbidden:
		return fmt.Errorf("forge: %s: %w: %w", op, ErrForbidden, err)
	case got.status == http.StatusBadGateway || got.status == http.StatusGatewayTimeout:
		return fmt.Errorf("forge: %s: %w %d: %w: %w", op, ErrServer, got.status, ErrQueryTimeout, err)
	case got.status >= 500:
		return fmt.Errorf("forge: %s: %w %d: %w", op, ErrServer, got.status, err)
	case got.status == 0 && isTimeout(err):
		return fmt.Errorf("forge: %s: %w: %w", op, ErrQueryTimeout, err)
	}
	return fmt.Errorf("forge: %s: %w", op, err)
}

// captured is a GraphQL answer as it came back: githubv4 keeps only the
// data and the errors' messages.
type captured struct {
	status int // 0: no answer
	host   string
	header http.Header
	body   []byte
}

// captureTransport keeps a copy of the answer's status and body for
// PullStates, and hands the answer on untouched.
type captureTransport struct {
	next http.RoundTripper
	into *captured
}

// RoundTrip implements http.RoundTripper.
func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	t.into.status, t.into.host, t.into.header, t.into.body = resp.StatusCode, req.URL.Host, resp.Header, body
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
