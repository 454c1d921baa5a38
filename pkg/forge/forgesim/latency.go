package forgesim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// Latency is the latency model: how long GitHub takes to answer. Durations
// are GitHub's seconds; the simulator waits them on its own clock, scaled
// by its minute (WithMinute), so a run that compresses a minute compresses
// every answer alike. With the model on, each answered request takes
//
//	median × e^(Tail·Z), Z a standard normal draw
//
// where median is REST[route] for a REST request (else RESTPage for a list
// route, else RESTDefault), and GraphQLBase + GraphQLPerNode × nodes for a GraphQL
// query, nodes being the nodes it asks for (GitHub's rateLimit.nodeCount:
// each connection's first or last times its parents'). A refusal by any
// limit, and a GraphQL answer that costs nothing (an invalid query, a
// primary-limit refusal), takes no time.
type Latency struct {
	// REST is the median time of a REST answer by route pattern, such as
	// "GET /repos/{owner}/{repo}/pulls/{number}", for the routes it names.
	REST map[string]time.Duration
	// RESTPage is the median time of a page of a list route (the issues
	// list, an installation's repositories) REST does not name, whatever
	// per_page asks: a page of 100's.
	RESTPage time.Duration
	// RESTDefault is the median time of any other REST answer.
	RESTDefault time.Duration
	// GraphQLBase is the median time of a query asking for no nodes.
	GraphQLBase time.Duration
	// GraphQLPerNode is what each node a query asks for adds to its median.
	GraphQLPerNode time.Duration
	// Tail is the log-normal shape: 0 makes every answer take its median;
	// TailFor names the tail that times out a given share of a query.
	Tail float64
	// BadGatewayShare is the share, 0 to 1, of timed-out GraphQL queries
	// answered 502; the rest are answered 504.
	BadGatewayShare float64
	// Seed seeds the draws: one seed and one order of requests give the
	// same times.
	Seed uint64
	// PerQuery draws each GraphQL query's time, and whether a timeout is a
	// 502, from Seed, the request's body and how many times its principal
	// sent that body before, rather than from one stream in the order all
	// requests arrive. Two runs that send the same queries then meet the
	// same times and the same timeouts, whatever else was asked, by whom
	// and in what order: a harness comparing replica counts on one
	// simulator meets the same draws at each (common random numbers). Each
	// draw is still a fresh one (the k-th sending of a body draws anew),
	// so the model's distribution is unchanged. REST answers keep the
	// stream.
	PerQuery bool
}

// GraphQLTimeout is how long GitHub lets a GraphQL query run: "If GitHub
// takes more than 10 seconds to process an API request, GitHub will
// terminate the request", answering 502 or 504 ("Rate limits and query
// limits for the GraphQL API", Timeouts:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts).
const GraphQLTimeout = 10 * time.Second

// RESTTimeout is how long GitHub lets a REST request run: "If GitHub takes
// more than 10 seconds to process an API request, GitHub will terminate
// the request and you will receive a timeout response and a \"Server
// Error\" message" ("Troubleshooting the REST API", Timeouts:
// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#timeouts).
const RESTTimeout = 10 * time.Second

// GitHubLatency is the default latency model, grounded in what clients of
// github.com report:
//
//   - a REST page of 100 takes about 2 s (Renovate's logs show 2–2.5 s per
//     page of 100 pull requests, renovatebot/renovate#1944): RESTPage;
//   - a lighter request takes 1–2 s (GitHub's CLI saw 1–2 s for a status
//     query, cli/cli#7421): 1 s for every other REST route, and for a
//     GraphQL query asking for no nodes;
//   - a 100-pull GraphQL query with each pull's last commit (100 nodes) has
//     a median of 1.5 s: 1 s plus 5 ms a node;
//   - such queries hit the 10 s timeout often enough that clients halve
//     their pages (facebook/sapling#782, apache/devlake#3635): the tail
//     times out 2% of them, and the docs name 502 and 504 alike, so half of
//     the timeouts are 502s.
//
// One log-normal spread makes both the body and the 2% of timeouts, so the
// body is wide (a 90th percentile of 4.9 s, a mean of 2.2 s for the 1.5 s
// median): wider than Renovate's seven consecutive pages (1.83–2.58 s)
// show. It is the pessimistic reading of the sources; a narrower body
// with the same timeouts would make every figure measured under it
// cheaper (docs/benchmarks.md, GitHub's clock).
//
// Each call returns a fresh value; change its fields freely.
func GitHubLatency() Latency {
	return Latency{
		RESTPage:        2 * time.Second,
		RESTDefault:     time.Second,
		GraphQLBase:     time.Second,
		GraphQLPerNode:  5 * time.Millisecond,
		Tail:            TailFor(1500*time.Millisecond, 0.02),
		BadGatewayShare: 0.5,
	}
}

// TailFor is the Latency.Tail that makes a query of median time median run
// past GraphQLTimeout for share (0 < share < 0.5) of its draws; 0 when
// share is out of that range or median is not below the timeout.
func TailFor(median time.Duration, share float64) float64 {
	if share <= 0 || share >= 0.5 || median <= 0 || median >= GraphQLTimeout {
		return 0
	}
	z := math.Sqrt2 * math.Erfinv(1-2*share) // P(Z > z) = share
	return math.Log(float64(GraphQLTimeout)/float64(median)) / z
}

// Validate names the first bad field of l, wrapping ErrBadRequest: a
// negative duration, a negative or infinite Tail, a BadGatewayShare
// outside 0–1.
func (l Latency) Validate() error {
	for route, d := range l.REST {
		if d < 0 {
			return badField("REST["+route+"]", d.String(), "must be >= 0")
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"RESTPage", l.RESTPage}, {"RESTDefault", l.RESTDefault}, {"GraphQLBase", l.GraphQLBase}, {"GraphQLPerNode", l.GraphQLPerNode}} {
		if f.d < 0 {
			return badField(f.name, f.d.String(), "must be >= 0")
		}
	}
	if l.Tail < 0 || math.IsNaN(l.Tail) || math.IsInf(l.Tail, 0) {
		return badField("Tail", fmt.Sprint(l.Tail), "must be a finite number >= 0")
	}
	if !(l.BadGatewayShare >= 0 && l.BadGatewayShare <= 1) {
		return badField("BadGatewayShare", fmt.Sprint(l.BadGatewayShare), "must be within 0–1")
	}
	return nil
}

// WithLatency turns the latency model on with l; without it (the default)
// every answer is instant. The waits run on the Go runtime's timers, scaled
// by the simulator's minute: virtual inside a testing/synctest bubble, and
// not shortened by Advance, which moves only the simulator's timestamps
// and windows. A wait ends when its request's context does (the client
// gave up, or a server whose BaseContext ends at its shutdown is shutting
// down), and the request then ends with no answer (http.ErrAbortHandler),
// its charge and stats kept. It panics naming the field when l has a
// negative duration, a negative Tail or a BadGatewayShare outside 0–1
// (Validate), as a bad option is a programming error; validate input
// first.
func WithLatency(l Latency) Option {
	if err := l.Validate(); err != nil {
		panic(fmt.Sprintf("forgesim: WithLatency: %v", err))
	}
	return func(s *Sim) {
		s.latency = &latencyModel{Latency: l, rng: rand.New(rand.NewPCG(l.Seed, 0)), sent: make(map[sentKey]uint64)}
	}
}

// latencyModel is Latency with its random source and, for PerQuery, how
// many times each principal sent each GraphQL body; s.mu guards both.
type latencyModel struct {
	Latency
	rng  *rand.Rand
	sent map[sentKey]uint64
}

// sentKey is a principal's GraphQL body, by its hash.
type sentKey struct {
	principal string
	body      uint64
}

// source is the random source of a GraphQL query's draws: with PerQuery,
// one of its own, seeded by Seed, body and how many times principal sent
// body before; else the model's stream. s.mu is held.
func (m *latencyModel) source(principal string, body []byte) *rand.Rand {
	if !m.PerQuery {
		return m.rng
	}
	h := fnv.New64a()
	h.Write(body)
	k := sentKey{principal, h.Sum64()}
	n := m.sent[k]
	m.sent[k] = n + 1
	return rand.New(rand.NewPCG(m.Seed^k.body, n*0x9e3779b97f4a7c15)) // n spread by the golden ratio, as SplitMix64 does
}

// draw is one answer's time of median, drawn from rng.
func (l Latency) draw(rng *rand.Rand, median time.Duration) time.Duration {
	if l.Tail == 0 {
		return median
	}
	return time.Duration(float64(median) * math.Exp(l.Tail*rng.NormFloat64()))
}

// GraphQLTime is how long a GraphQL query asking for nodes nodes runs
// under l, drawn from rng, and whether GitHub stops it at GraphQLTimeout
// (took is then GraphQLTimeout, the time it is charged): the draw the
// simulator makes for each query it answers. A caller may draw from it to
// reason about the model without a simulator (an estimate's Monte Carlo);
// one rng gives the same times in the same order.
func (l Latency) GraphQLTime(rng *rand.Rand, nodes int) (took time.Duration, timedOut bool) {
	took = l.draw(rng, l.GraphQLBase+time.Duration(nodes)*l.GraphQLPerNode)
	if took > GraphQLTimeout {
		return GraphQLTimeout, true
	}
	return took, false
}

// listRoutes are the REST routes that answer pages.
var listRoutes = map[string]bool{"GET /repos/{owner}/{repo}/issues": true, "GET /installation/repositories": true}

// restMedian is route's median time.
func (m *latencyModel) restMedian(route string) time.Duration {
	if d, ok := m.REST[route]; ok {
		return d
	}
	if listRoutes[route] {
		return m.RESTPage
	}
	return m.RESTDefault
}

// graphqlNodes is the nodes a GraphQL body asks for (0 for a body that
// does not parse).
func graphqlNodes(body []byte) int {
	var req gqlRequest
	if json.Unmarshal(body, &req) != nil {
		return 0
	}
	_, nodes, _ := priceQuery(req)
	return nodes
}
