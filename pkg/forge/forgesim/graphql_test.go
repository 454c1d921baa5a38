package forgesim_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

// gql posts query as tok and decodes the answer.
func gql(t *testing.T, srv interface{ Close() }, do func(body string) []byte, query string) gqlAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]string{"query": query})
	mustOK(t, err)
	var a gqlAnswer
	raw := do(string(body))
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return a
}

type gqlAnswer struct {
	Data   map[string]json.RawMessage
	Errors []struct {
		Type    string
		Path    []any
		Message string
	}
}

// pullsQuery reads n pull requests of acme/app (numbers 1..n) in one query,
// one alias each, as the forge client's batch does, with the rate limit.
func pullsQuery(n int) string {
	var b strings.Builder
	b.WriteString("query {")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, ` p%d: repository(owner: "acme", name: "app") { pullRequest(number: %d) { number state merged headRefOid commits(last: 1) { nodes { commit { oid status { state contexts { context state } } } } } } }`, i, i)
	}
	b.WriteString(" rateLimit { cost limit remaining used resetAt } }")
	return b.String()
}

func TestGraphQLPricesQueriesAsGitHubDocuments(t *testing.T) {
	cases := []struct {
		name  string
		query string
		cost  int
		why   string
	}{
		{"no connection", `{ viewer { login } rateLimit { cost } }`, 1,
			"a query without connections costs the minimum, 1 point"},
		{"100 pulls", pullsQuery(100), 1,
			"100 commits(last: 1) connections are 100 requests: 100/100 = 1 point"},
		{"149 pulls", pullsQuery(149), 1,
			"149 requests / 100 rounds to 1"},
		{"150 pulls", pullsQuery(150), 2,
			"150 requests / 100 rounds to 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sim, srv := start(t)
			for i := 1; i <= 150; i++ {
				mustOK(t, sim.SeedPull("acme", "app", i, fmt.Sprintf("sha%d", i), "open"))
			}
			a := gql(t, srv, func(body string) []byte { _, b := do(t, srv, "POST", "/graphql", "tok", body); return b }, c.query)
			if len(a.Errors) > 0 {
				t.Fatalf("errors %+v", a.Errors)
			}
			var rl struct{ Cost int }
			mustOK(t, json.Unmarshal(a.Data["rateLimit"], &rl))
			if rl.Cost != c.cost {
				t.Fatalf("got cost %d, want %d: %s", rl.Cost, c.cost, c.why)
			}
			got := sim.Requests(forgesim.Filter{Route: "POST /graphql"})
			var pts int64
			for _, rc := range sim.Stats().Requests {
				if rc.Route == "POST /graphql" {
					pts += rc.Points
				}
			}
			if got != 1 || pts != int64(c.cost) {
				t.Fatalf("got %d requests carrying %d points in the stats, want 1 carrying %d: the stats carry the points charged", got, pts, c.cost)
			}
			for _, w := range sim.Stats().Budget.Windows {
				if w.Resource == "graphql" && w.Used != c.cost {
					t.Fatalf("got %d points used, want %d: the query is charged its cost", w.Used, c.cost)
				}
			}
		})
	}
}

func TestGraphQLAnswersPullRequestsWithHeadStatus(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedPull("acme", "app", 1, "aaa", "open"))
	mustOK(t, sim.SeedPull("acme", "app", 2, "bbb", "open"))
	mustOK(t, sim.Merge("acme", "app", 2))
	mustOK(t, sim.SetStatus("acme", "app", "aaa", forgesim.Status{Context: "iterion/review", State: "failure"}))
	mustOK(t, sim.SetStatus("acme", "app", "aaa", forgesim.Status{Context: "iterion/review", State: "success"}))
	a := gql(t, srv, func(body string) []byte { _, b := do(t, srv, "POST", "/graphql", "tok", body); return b }, pullsQuery(3))
	got := string(a.Data["p1"]) + " " + string(a.Data["p2"]) + " " + string(a.Data["p3"])
	want := `{"pullRequest":{"number":1,"state":"OPEN","merged":false,"headRefOid":"aaa","commits":{"nodes":[{"commit":{"oid":"aaa","status":{"state":"SUCCESS","contexts":[{"context":"iterion/review","state":"SUCCESS"}]}}}]}}} ` +
		`{"pullRequest":{"number":2,"state":"MERGED","merged":true,"headRefOid":"bbb","commits":{"nodes":[{"commit":{"oid":"bbb","status":null}}]}}} ` +
		`{"pullRequest":null}`
	if got != want {
		t.Fatalf("got %s\nwant %s: each alias answers its pull request, the head's latest status per context (null without any), MERGED for a merged one", got, want)
	}
	if len(a.Errors) != 1 || a.Errors[0].Type != "NOT_FOUND" || fmt.Sprint(a.Errors[0].Path) != "[p3 pullRequest]" {
		t.Fatalf("got errors %+v, want one NOT_FOUND at [p3 pullRequest]: a missing pull request is its alias's error, the others still answer", a.Errors)
	}
}

func TestGraphQLRefusals(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(2))
	mustOK(t, sim.SeedPull("acme", "app", 1, "aaa", "open"))
	post := func(body string) []byte { _, b := do(t, srv, "POST", "/graphql", "tok", body); return b }
	a := gql(t, srv, post, `{ repository(owner: "acme", name: "app") { pullRequest(number: 1) { commits { totalCount } } } }`)
	if len(a.Errors) != 1 || !strings.Contains(a.Errors[0].Message, "`first` or `last`") {
		t.Fatalf("got %+v, want one error asking for first or last: every connection must be paginated", a.Errors)
	}
	a = gql(t, srv, post, `{ nope }`)
	if len(a.Errors) == 0 || a.Data != nil {
		t.Fatalf("got %+v, want a validation error and no data: a query outside the schema is refused", a)
	}
	for range 2 {
		gql(t, srv, post, `{ viewer { login } }`)
	}
	resp, raw := do(t, srv, "POST", "/graphql", "tok", `{"query":"{ viewer { login } }"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"type":"RATE_LIMITED"`) || resp.Header.Get("X-Ratelimit-Remaining") != "0" {
		t.Fatalf("got %d %s remaining %q, want 200 with a RATE_LIMITED error and remaining 0: GitHub's GraphQL answer to a spent budget",
			resp.StatusCode, raw, resp.Header.Get("X-Ratelimit-Remaining"))
	}
	for _, w := range sim.Stats().Budget.Windows {
		if w.Token == "tok" && w.Resource == "graphql" && w.Used != 2 {
			t.Fatalf("got %d points used, want 2: invalid and refused queries cost nothing", w.Used)
		}
		if w.Token == "tok" && w.Resource == "core" {
			t.Fatalf("got a core window %+v, want none: GraphQL points are a budget of their own", w)
		}
	}
}

// TestGraphQLRefusesRequestsWithoutAToken: GitHub's GraphQL API answers a
// request without a token 401, "This endpoint requires you to be
// authenticated.", charging nothing, whatever shape the rate limits'
// refusals are given; a token's request is answered.
func TestGraphQLRefusesRequestsWithoutAToken(t *testing.T) {
	for _, answer := range []forgesim.GraphQLLimitAnswer{forgesim.GraphQLLimitMixed, forgesim.GraphQLLimit200, forgesim.GraphQLLimit403} {
		sim := forgesim.New(forgesim.WithGraphQLLimitAnswer(answer))
		query := `{"query":"{ viewer { login } }"}`
		rec := call(sim, "POST", "/graphql", "", strings.NewReader(query))
		var e struct {
			Message          string
			DocumentationURL string `json:"documentation_url"`
		}
		mustOK(t, json.Unmarshal(rec.Body.Bytes(), &e))
		if rec.Code != 401 || e.Message != "This endpoint requires you to be authenticated." || !strings.HasSuffix(e.DocumentationURL, "#authenticating-with-graphql") {
			t.Errorf("limit answer %v, no token: got %d %s, want 401 \"This endpoint requires you to be authenticated.\": GitHub's GraphQL API needs a token", answer, rec.Code, rec.Body)
		}
		for _, w := range sim.Stats().Budget.Windows {
			if w.Used != 0 {
				t.Errorf("limit answer %v, no token: got window %+v charged, want nothing charged: a 401 costs nothing", answer, w)
			}
		}
		if rec := call(sim, "POST", "/graphql", "tok", strings.NewReader(query)); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"login":"tok"`) {
			t.Errorf("limit answer %v, a token: got %d %s, want 200 with the viewer", answer, rec.Code, rec.Body)
		}
	}
}

func TestGraphQLPaginationArgumentsMayBeVariables(t *testing.T) {
	sim := forgesim.New()
	mustOK(t, sim.SeedPull("acme", "app", 1, "sha1", "open"))
	body, err := json.Marshal(map[string]any{
		"query":     `query($n: Int!) { repository(owner: "acme", name: "app") { pullRequest(number: 1) { commits(last: $n) { totalCount } } } }`,
		"variables": map[string]any{"n": 1},
	})
	mustOK(t, err)
	rec := call(sim, "POST", "/graphql", "tok", strings.NewReader(string(body)))
	var a gqlAnswer
	mustOK(t, json.Unmarshal(rec.Body.Bytes(), &a))
	if rec.Code != 200 || len(a.Errors) > 0 || a.Data == nil {
		t.Fatalf("commits(last: $n) with n = 1: got %d %s, want data and no errors: a connection's first or last may come from a variable (a JSON number)", rec.Code, rec.Body)
	}
}

func TestGraphQLPrimaryRefusalReportsNoneRemaining(t *testing.T) {
	sim := forgesim.New(forgesim.WithBudget(2))
	seedPulls(t, sim, 150)
	if rec := call(sim, "POST", "/graphql", "tok", strings.NewReader(gqlBody(`{ viewer { login } }`))); rec.Code != 200 || remaining(rec) != "1" {
		t.Fatalf("a 1-point query on a budget of 2: got %d remaining %s, want 200 remaining 1", rec.Code, remaining(rec))
	}
	rec := call(sim, "POST", "/graphql", "tok", strings.NewReader(gqlBody(pullsQuery(150))))
	if !strings.Contains(rec.Body.String(), `"type":"RATE_LIMITED"`) {
		t.Fatalf("a 2-point query with 1 point left: got %d %s, want a RATE_LIMITED error", rec.Code, rec.Body)
	}
	if got, used := remaining(rec), rec.Header().Get("X-Ratelimit-Used"); got != "0" || used != "1" {
		t.Errorf("the RATE_LIMITED answer: got remaining %s used %s, want remaining 0 used 1: over the primary limit GitHub reports none remaining, and the refusal costs nothing", got, used)
	}
}

// TestGraphQLNodeLimitsAreGitHubsEdges pins the node limits at their
// edges ("Rate limits and query limits for the GraphQL API", Node limit:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#node-limit):
// first or last within 1–100, and at most 500,000 nodes a call.
func TestGraphQLNodeLimitsAreGitHubsEdges(t *testing.T) {
	sim := forgesim.New(forgesim.WithBudget(1 << 20))
	mustOK(t, sim.SeedPull("acme", "app", 1, "aaa", "open"))
	// query asks for commits(last: n) of pull 1 under each of aliases.
	query := func(aliases int, n int, extra string) string {
		var b strings.Builder
		b.WriteString("{ ")
		for i := range aliases {
			fmt.Fprintf(&b, `a%d: repository(owner: "acme", name: "app") { pullRequest(number: 1) { commits(last: %d) { totalCount } } } `, i, n)
		}
		b.WriteString(extra + " }")
		return b.String()
	}
	errOf := func(q string) string {
		rec := call(sim, "POST", "/graphql", "t", strings.NewReader(gqlBody(q)))
		var a gqlAnswer
		mustOK(t, json.Unmarshal(rec.Body.Bytes(), &a))
		if len(a.Errors) == 0 {
			return ""
		}
		return a.Errors[0].Type
	}
	cases := []struct {
		why, query, want string
	}{
		{"last: 100 is within 1–100", query(1, 100, ""), ""},
		{"last: 101 is past 100", query(1, 101, ""), "MISSING_PAGINATION_BOUNDARIES"},
		{"500,000 nodes is the most a call may ask for", query(5000, 100, ""), ""},
		{"500,001 nodes is one past it", query(5000, 100, `b: repository(owner: "acme", name: "app") { pullRequest(number: 1) { commits(last: 1) { totalCount } } }`), "MAX_NODE_LIMIT_EXCEEDED"},
	}
	for _, c := range cases {
		if got := errOf(c.query); got != c.want {
			t.Errorf("got error type %q, want %q: %s", got, c.want, c.why)
		}
	}
}
