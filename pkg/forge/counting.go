package forge

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// API names the forge API a request went to.
const (
	APIREST    = "REST"
	APIGraphQL = "GraphQL"
)

// laneKey is the context key WithLane stores the lane under.
type laneKey struct{}

// WithLane returns a copy of ctx whose forge requests are charged to lane.
// An empty lane is charged to LaneUnlaned.
func WithLane(ctx context.Context, lane string) context.Context {
	return context.WithValue(ctx, laneKey{}, lane)
}

// laneOf is the lane ctx carries, LaneUnlaned when none.
func laneOf(ctx context.Context) string {
	if lane, _ := ctx.Value(laneKey{}).(string); lane != "" {
		return lane
	}
	return LaneUnlaned
}

// apiOf tells a client's GraphQL requests, those to endpoint, the path of
// its GraphQL endpoint (graphqlPath), from its REST ones. The counting
// transport and the rate gate both ask it.
func apiOf(req *http.Request, endpoint string) string {
	if req.URL.Path == endpoint {
		return APIGraphQL
	}
	return APIREST
}

// installationKey is the context key of the App installation a request
// is made for.
type installationKey struct{}

// withInstallation returns a copy of ctx whose requests are counted as
// installation id's.
func withInstallation(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, installationKey{}, id)
}

// installationOf is the installation ctx carries, 0 when none.
func installationOf(ctx context.Context) int64 {
	id, _ := ctx.Value(installationKey{}).(int64)
	return id
}

// Count is the number of requests sent to one host and API, charged to one
// lane, that got one status code (0: a transport error, no status).
// Points is the GraphQL points those requests cost, as the forge reported
// them (rateLimit { cost }); REST requests carry none. Installation is the
// App installation an AppClient's installation client sent them for; 0
// for everything else (a Client made by New, the AppClient's own requests
// with the App's JWT).
type Count struct {
	Host         string
	API          string
	Lane         string
	Code         int
	N            int64
	Points       int64
	Installation int64
}

// countKey is what a request is counted by; it is comparable, so looking an
// existing entry up costs no allocation.
type countKey struct {
	host, api, lane string
	code            int
	installation    int64
}

// countEntry is one key's running total, its count in the hour being
// counted, and its cached Prometheus child.
type countEntry struct {
	n, points         int64
	hour, hourPoints  int64
	child, pointChild prometheus.Counter // nil without a Registerer
}

// countingTransport counts every request handed to its RoundTrip once its
// answer or error is back — each redirect hop and each retry arrive as calls
// of their own — by host, API, lane and status code (0 for a transport error),
// and never modifies the request.
//
// It is safe for concurrent use. It also feeds the hourly log line.
type countingTransport struct {
	next    http.RoundTripper
	graphql string // the GraphQL endpoint's path (apiOf)
	now     func() time.Time
	vecs    countingVecs

	mu      sync.Mutex
	entries map[countKey]*countEntry
	hour    hourly
}

func newCountingTransport(next http.RoundTripper, graphql string, now func() time.Time, vecs countingVecs, h hourly) *countingTransport {
	return &countingTransport{next: next, graphql: graphql, now: now, vecs: vecs, entries: make(map[countKey]*countEntry), hour: h}
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.count(countKey{host: req.URL.Host, api: apiOf(req, t.graphql), lane: laneOf(req.Context()), code: code, installation: installationOf(req.Context())})
	return resp, err
}

// count charges one request to k, rolling the hour over first when the
// request belongs to a later hour than the one being counted.
func (t *countingTransport) count(k countKey) {
	t.charge(k, 1, 0)
}

// chargePoints adds the points a GraphQL query to host on lane cost (its
// 200 answer is already counted) to that request's entry.
func (t *countingTransport) chargePoints(host, lane string, installation, points int64) {
	t.charge(countKey{host: host, api: APIGraphQL, lane: lane, code: http.StatusOK, installation: installation}, 0, points)
}

// charge adds n requests and points to k's entry, rolling the hour over first.
func (t *countingTransport) charge(k countKey, n, points int64) {
	now := t.now()
	t.mu.Lock()
	line := t.hour.roll(now, t.entries)
	e := t.entries[k]
	if e == nil {
		e = &countEntry{}
		if t.vecs.requests != nil {
			e.child = t.vecs.requests.WithLabelValues(k.host, k.api, k.lane, codeLabel(k.code))
			if k.api == APIGraphQL {
				e.pointChild = t.vecs.points.WithLabelValues(k.host, k.lane)
			}
		}
		t.entries[k] = e
	}
	e.n += n
	e.hour += n
	e.points += points
	e.hourPoints += points
	t.mu.Unlock()
	if e.child != nil {
		e.child.Add(float64(n))
	}
	if e.pointChild != nil {
		e.pointChild.Add(float64(points))
	}
	t.hour.write(line)
}

// flush writes the line for the hour being counted, as a partial hour ending
// now; it writes nothing when no request was counted since the last line.
func (t *countingTransport) flush() {
	now := t.now()
	t.mu.Lock()
	line := t.hour.close(now, t.entries)
	t.mu.Unlock()
	t.hour.write(line)
}

// counts is a snapshot of every total since the transport was made, sorted
// by host, API, lane, code and installation.
func (t *countingTransport) counts() []Count {
	t.mu.Lock()
	out := make([]Count, 0, len(t.entries))
	for k, e := range t.entries {
		out = append(out, Count{Host: k.host, API: k.api, Lane: k.lane, Code: k.code, N: e.n, Points: e.points, Installation: k.installation})
	}
	t.mu.Unlock()
	sortCounts(out)
	return out
}

func sortCounts(cs []Count) {
	slices.SortFunc(cs, func(a, b Count) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		if c := strings.Compare(a.API, b.API); c != 0 {
			return c
		}
		if c := strings.Compare(a.Lane, b.Lane); c != 0 {
			return c
		}
		if c := a.Code - b.Code; c != 0 {
			return c
		}
		return cmp.Compare(a.Installation, b.Installation)
	})
}

// codeLabel is the Prometheus code label: the status, or "error" when the
// transport returned no answer.
func codeLabel(code int) string {
	if code == 0 {
		return "error"
	}
	return strconv.Itoa(code)
}

// countingVecs are the counting transport's Prometheus counters; both nil
// without a Registerer.
type countingVecs struct {
	requests, points *prometheus.CounterVec
}

// newCountingVecs registers forge_http_requests_total and
// forge_graphql_points_total on reg, or takes the ones already registered
// there, so several Clients can share a registry.
func newCountingVecs(reg prometheus.Registerer) (countingVecs, error) {
	if reg == nil {
		return countingVecs{}, nil
	}
	requests, err := registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "forge_http_requests_total",
		Help: "Forge HTTP requests sent, each redirect hop and retry included, by host, API (REST/GraphQL), lane and status code (error: no answer).",
	}, []string{"host", "api", "lane", "code"}))
	if err != nil {
		return countingVecs{}, err
	}
	points, err := registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "forge_graphql_points_total",
		Help: "GraphQL points the forge charged for the queries sent (their rateLimit cost), by host and lane.",
	}, []string{"host", "lane"}))
	return countingVecs{requests: requests, points: points}, err
}

// registerShared registers c on reg and returns it, or returns the collector
// of the same description already registered there, so several Clients can
// share a registry. A nil reg registers nothing and returns nil.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	var none C
	if reg == nil {
		return none, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return none, err
	}
	return c, nil
}
