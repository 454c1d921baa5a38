package forgesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	graphql "github.com/graph-gophers/graphql-go"
	"github.com/vektah/gqlparser/v2"
	gqlast "github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"
)

// graphqlSchema is the subset of GitHub's public GraphQL schema the forge
// client uses. Type, field, argument and enum names are GitHub's, from
// octokit/graphql-schema (schema.graphql); fields the client never asks for
// are left out. graph-gophers/graphql-go executes it; gqlparser reads the
// same text to price a query before it runs.
const graphqlSchema = `
schema { query: Query }

scalar DateTime
scalar GitObjectID

enum PullRequestState { CLOSED MERGED OPEN }
enum StatusState { ERROR EXPECTED FAILURE PENDING SUCCESS }

type Query {
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  rateLimit(dryRun: Boolean = false): RateLimit
  viewer: User!
}

type User { login: String! }

type Repository {
  name: String!
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
}

type PullRequest {
  number: Int!
  state: PullRequestState!
  merged: Boolean!
  headRefOid: GitObjectID!
  commits(after: String, before: String, first: Int, last: Int): PullRequestCommitConnection!
}

type PullRequestCommitConnection {
  nodes: [PullRequestCommit]
  totalCount: Int!
}

type PullRequestCommit { commit: Commit! }

type Commit {
  oid: GitObjectID!
  status: Status
}

type Status {
  state: StatusState!
  contexts: [StatusContext!]!
}

type StatusContext {
  context: String!
  state: StatusState!
  description: String
}

type RateLimit {
  cost: Int!
  limit: Int!
  nodeCount: Int!
  remaining: Int!
  resetAt: DateTime!
  used: Int!
}
`

// GraphQLSchema is the schema the simulator's POST /graphql serves, in
// GraphQL's schema language: a subset of GitHub's public schema, every type,
// field and argument of it named and typed as GitHub's (the contract test in
// internal/testing/githubcontract holds it to that).
func GraphQLSchema() string { return graphqlSchema }

// graphqlDoc is GitHub's page on GraphQL rate limits and query limits, the
// source of every pricing rule below.
const graphqlDoc = "https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api"

// The limits of that page.
const (
	// maxPage: first and last must be within 1–100 on every connection.
	maxPage = 100
	// maxNodes: one call may request at most 500,000 nodes.
	maxNodes = 500_000
)

var (
	// execSchema runs queries; its resolvers are bound per request.
	execSchema = graphql.MustParseSchema(graphqlSchema, &gqlRoot{}, graphql.UseFieldResolvers())
	// priceSchema is the same schema as gqlparser sees it, for pricing.
	priceSchema = gqlparser.MustLoadSchema(&gqlast.Source{Name: "github", Input: graphqlSchema})
)

// gqlRequest is a GraphQL request body, as GitHub takes it.
type gqlRequest struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// gqlError is one entry of a GraphQL answer's errors, in GitHub's shape: a
// type such as NOT_FOUND, FORBIDDEN or RATE_LIMITED beside the message.
type gqlError struct {
	Type      string        `json:"type,omitempty"`
	Path      []any         `json:"path,omitempty"`
	Locations []gqlLocation `json:"locations,omitempty"`
	Message   string        `json:"message"`
}

type gqlLocation struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func (e *gqlError) Error() string { return e.Message }

// gqlAnswer is a GraphQL answer body.
type gqlAnswer struct {
	Data   json.RawMessage `json:"data,omitempty"`
	Errors []*gqlError     `json:"errors,omitempty"`
}

// gqlWindow is the point budget a GraphQL request draws on: GitHub keeps
// GraphQL points apart from REST requests ("graphql" resource), for the
// same principal as REST. It is keyed exactly as the REST budget is, in
// this one place, so a change of who shares a budget (budget.go's window
// key) moves both; s.mu is held.
func (s *Sim) gqlWindow(tok string, now time.Time) (*window, int) {
	p := s.principalOf(tok)
	return s.window(p, "graphql", now), s.limitOf(p, "graphql")
}

// graphql answers POST /graphql: it prices the query as GitHub documents,
// refuses it with RATE_LIMITED when the point budget cannot pay, charges
// the points, then runs it. s.mu is held (the api wrapper's), and the
// resolvers read the simulator's state under it.
func (s *Sim) graphql(r *http.Request, tok string) reply {
	var req gqlRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Query == "" {
		return errorReply(http.StatusBadRequest, "Problems parsing JSON")
	}
	now := s.clock()
	cost, nodes, errs := priceQuery(req)
	if len(errs) > 0 {
		// An invalid query is answered, not run, and costs nothing.
		return reply{status: http.StatusOK, body: gqlAnswer{Errors: errs}, free: true}
	}
	win, limit := s.gqlWindow(tok, now)
	if win.used+cost > limit {
		// Over the primary limit GitHub still answers 200, with a
		// RATE_LIMITED error and x-ratelimit-remaining 0 (graphqlDoc,
		// "Exceeding the rate limit").
		return reply{status: http.StatusOK, free: true, body: gqlAnswer{Errors: []*gqlError{{
			Type:    "RATE_LIMITED",
			Message: "API rate limit exceeded for " + tokenLabel(tok) + ".",
		}}}}
	}
	call := &gqlCall{s: s, tok: tok, rate: gqlRateLimit{
		cost: cost, nodes: nodes, limit: limit, used: win.used + cost, reset: win.reset,
	}}
	ctx := context.WithValue(r.Context(), gqlCallKey{}, call)
	res := execSchema.Exec(ctx, req.Query, req.OperationName, req.Variables)
	out := gqlAnswer{Data: res.Data}
	for _, e := range res.Errors {
		ge := &gqlError{Path: e.Path, Message: e.Message}
		if re := (*gqlError)(nil); errors.As(e.ResolverError, &re) {
			ge.Type, ge.Message = re.Type, re.Message
		}
		for _, l := range e.Locations {
			ge.Locations = append(ge.Locations, gqlLocation(l))
		}
		out.Errors = append(out.Errors, ge)
	}
	return reply{status: http.StatusOK, body: out, points: cost, reads: call.reads}
}

// priceQuery is GitHub's price of a query (graphqlDoc, "Calculating a
// rate limit score"): the requests needed to fulfil each connection,
// assuming every one reaches its first or last limit (a connection nested
// in another costs one request per node of its parent), summed, divided by
// 100 and rounded, at least 1 point. It also counts the nodes the query may
// return (each connection's limit times its parents') and refuses what
// GitHub refuses before running: an invalid query, a connection without
// first or last or with one outside 1–100, more than 500,000 nodes.
func priceQuery(req gqlRequest) (points, nodes int, errs []*gqlError) {
	doc, list := gqlparser.LoadQueryWithRules(priceSchema, req.Query, nil)
	if len(list) > 0 {
		for _, e := range list {
			ge := &gqlError{Message: e.Message}
			for _, l := range e.Locations {
				ge.Locations = append(ge.Locations, gqlLocation{Line: l.Line, Column: l.Column})
			}
			errs = append(errs, ge)
		}
		return 0, 0, errs
	}
	op := doc.Operations.ForName(req.OperationName)
	if op == nil {
		return 0, 0, []*gqlError{{Message: fmt.Sprintf("No operation named %q", req.OperationName)}}
	}
	vars, verr := validator.VariableValues(priceSchema, op, req.Variables)
	if verr != nil {
		return 0, 0, []*gqlError{{Message: verr.Error()}}
	}
	var requests int
	var walk func(set gqlast.SelectionSet, mult int) *gqlError
	walk = func(set gqlast.SelectionSet, mult int) *gqlError {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *gqlast.Field:
				inner := mult
				if sel.Definition != nil && strings.HasSuffix(sel.Definition.Type.Name(), "Connection") {
					args := sel.ArgumentMap(vars)
					page := max(intArg(args["first"]), intArg(args["last"]))
					if page < 1 || page > maxPage {
						return &gqlError{Type: "MISSING_PAGINATION_BOUNDARIES", Path: []any{sel.Alias}, Message: fmt.Sprintf(
							"You must provide a `first` or `last` value between 1 and %d to properly paginate the `%s` connection.", maxPage, sel.Name)}
					}
					requests += mult
					inner = mult * int(page)
					nodes += inner
				}
				if err := walk(sel.SelectionSet, inner); err != nil {
					return err
				}
			case *gqlast.InlineFragment:
				if err := walk(sel.SelectionSet, mult); err != nil {
					return err
				}
			case *gqlast.FragmentSpread:
				if err := walk(sel.Definition.SelectionSet, mult); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(op.SelectionSet, 1); err != nil {
		return 0, 0, []*gqlError{err}
	}
	if nodes > maxNodes {
		return 0, 0, []*gqlError{{Type: "MAX_NODE_LIMIT_EXCEEDED", Message: fmt.Sprintf(
			"This query requests up to %d possible nodes which exceeds the maximum limit of %d.", nodes, maxNodes)}}
	}
	return max(1, int(math.Round(float64(requests)/100))), nodes, nil
}

// The resolvers. They run inside graphql, with s.mu held.

// gqlRoot resolves Query's fields from the gqlCall in the context.
type gqlRoot struct{}

// gqlCall is one request's state, handed to the root resolvers in the context.
type gqlCall struct {
	s    *Sim
	tok  string
	rate gqlRateLimit
	// reads are the pull requests the query resolved (clock_stats.go);
	// readsMu guards it, as resolvers run concurrently.
	readsMu sync.Mutex
	reads   []pullRef
}

type gqlCallKey struct{}

func callOf(ctx context.Context) *gqlCall { return ctx.Value(gqlCallKey{}).(*gqlCall) }

// gqlRateLimit is the budget after this query's charge.
type gqlRateLimit struct {
	cost, nodes, limit, used int
	reset                    time.Time
}

func (r gqlRateLimit) Cost() int32      { return int32(r.cost) }
func (r gqlRateLimit) Limit() int32     { return int32(r.limit) }
func (r gqlRateLimit) NodeCount() int32 { return int32(r.nodes) }
func (r gqlRateLimit) Remaining() int32 { return int32(max(r.limit-r.used, 0)) }
func (r gqlRateLimit) Used() int32      { return int32(r.used) }
func (r gqlRateLimit) ResetAt() gqlScalar {
	return gqlScalar(ghTime(r.reset))
}

// gqlScalar is a string-valued custom scalar (DateTime, GitObjectID).
type gqlScalar string

func (gqlScalar) ImplementsGraphQLType(name string) bool {
	return name == "DateTime" || name == "GitObjectID"
}

func (s *gqlScalar) UnmarshalGraphQL(input any) error {
	v, ok := input.(string)
	if !ok {
		return fmt.Errorf("forgesim: want a string, got %T", input)
	}
	*s = gqlScalar(v)
	return nil
}

func (*gqlRoot) RateLimit(ctx context.Context, _ struct{ DryRun bool }) *gqlRateLimit {
	return &callOf(ctx).rate
}

func (*gqlRoot) Viewer(ctx context.Context) *gqlUser {
	return &gqlUser{Login: callOf(ctx).tok}
}

type gqlUser struct{ Login string }

func (*gqlRoot) Repository(ctx context.Context, args struct {
	Owner, Name   string
	FollowRenames bool
}) (*gqlRepo, error) {
	call := callOf(ctx)
	s := call.s
	rp := s.repoFor(args.Owner, args.Name, false)
	if rp == nil || !s.reachesRepo(call.tok, args.Owner, args.Name) {
		return nil, &gqlError{Type: "NOT_FOUND", Message: fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", args.Owner, args.Name)}
	}
	return &gqlRepo{rp: rp}, nil
}

type gqlRepo struct{ rp *repo }

func (g *gqlRepo) Name() string          { return g.rp.name }
func (g *gqlRepo) NameWithOwner() string { return g.rp.owner + "/" + g.rp.name }

func (g *gqlRepo) PullRequest(ctx context.Context, args struct{ Number int32 }) (*gqlPull, error) {
	is := g.rp.issues[int(args.Number)]
	if is == nil || is.pull == nil {
		return nil, &gqlError{Type: "NOT_FOUND", Message: fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", args.Number)}
	}
	call := callOf(ctx)
	call.readsMu.Lock()
	call.reads = append(call.reads, pullRef{repo: g.rp.owner + "/" + g.rp.name, number: is.number})
	call.readsMu.Unlock()
	return &gqlPull{rp: g.rp, is: is}, nil
}

type gqlPull struct {
	rp *repo
	is *issue
}

func (p *gqlPull) Number() int32 { return int32(p.is.number) }

// State is MERGED for a merged pull request, as on GitHub, else OPEN or CLOSED.
func (p *gqlPull) State() string {
	if !p.is.pull.merged.IsZero() {
		return "MERGED"
	}
	return strings.ToUpper(p.is.state)
}

func (p *gqlPull) Merged() bool          { return !p.is.pull.merged.IsZero() }
func (p *gqlPull) HeadRefOid() gqlScalar { return gqlScalar(p.is.pull.headSHA) }

// Commits lists the pull request's commits; the simulator knows only the
// head, so every page holds that one commit.
func (p *gqlPull) Commits(struct {
	After, Before *string
	First, Last   *int32
}) *gqlCommits {
	return &gqlCommits{rp: p.rp, sha: p.is.pull.headSHA}
}

type gqlCommits struct {
	rp  *repo
	sha string
}

func (c *gqlCommits) TotalCount() int32 { return 1 }

func (c *gqlCommits) Nodes() *[]*gqlPullCommit {
	return &[]*gqlPullCommit{{rp: c.rp, sha: c.sha}}
}

type gqlPullCommit struct {
	rp  *repo
	sha string
}

func (c *gqlPullCommit) Commit() *gqlPullCommit { return c }
func (c *gqlPullCommit) Oid() gqlScalar         { return gqlScalar(c.sha) }

// Status is the commit's combined status, null when it has none, as on
// GitHub; its state follows the REST combined status's rule.
func (c *gqlPullCommit) Status() *gqlStatus {
	latest := latestByContext(c.rp.statuses[c.sha])
	if len(latest) == 0 {
		return nil
	}
	return &gqlStatus{latest: latest}
}

type gqlStatus struct{ latest []*status }

func (st *gqlStatus) State() string { return strings.ToUpper(combinedState(st.latest)) }

func (st *gqlStatus) Contexts() []*gqlContext {
	out := make([]*gqlContext, 0, len(st.latest))
	for _, s := range st.latest {
		out = append(out, &gqlContext{s})
	}
	return out
}

type gqlContext struct{ st *status }

func (c *gqlContext) Context() string      { return c.st.context }
func (c *gqlContext) State() string        { return strings.ToUpper(c.st.state) }
func (c *gqlContext) Description() *string { return optString(c.st.description) }

// intArg is an Int argument's value as VariableValues leaves it: an int64
// for a literal (or a json.Number, which it converts), a float64 for a
// variable as encoding/json decodes a JSON number (VariableValues has
// refused a fractional one); 0 for anything else.
func intArg(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}
