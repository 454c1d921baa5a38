package forgesim

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// RouteUnmatched is the route of requests no simulated endpoint matched
// (answered 404).
const RouteUnmatched = "unmatched"

type statKey struct {
	token, method, route string
	status               int
}

// RequestCount is how many requests one token sent to one route with one
// method and got one status. Route is the endpoint's pattern, such as
// "GET /repos/{owner}/{repo}/pulls/{number}"; Token is the token as sent,
// "app:<id>" for an App's JWT, "" when anonymous.
//
// Points is the budget units those requests were charged: one per charged
// REST request (a 304 or a refusal is free), a GraphQL query's points.
// Seconds is their modelled response time in GitHub's seconds (WithLatency;
// 0, and left out of the JSON, with the model off): what GitHub's CPU-time
// limit counts.
type RequestCount struct {
	Token   string  `json:"token"`
	Method  string  `json:"method"`
	Route   string  `json:"route"`
	Status  int     `json:"status"`
	Count   int64   `json:"count"`
	Points  int64   `json:"points"`
	Seconds float64 `json:"seconds,omitempty"`
}

// BudgetWindow is one principal's current budget window for one resource.
// Token names the principal, whose budget every token of it shares (JSON
// "token", kept for existing readers): a plain token's user, which is the
// token itself unless MapToken named another; "installation:<id>" for the
// tokens minted for an installation; "app:<id>" for an App's JWTs.
type BudgetWindow struct {
	Token     string    `json:"token"`
	Resource  string    `json:"resource"`
	Limit     int       `json:"limit"`
	Used      int       `json:"used"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// Budget is the budgets: the default limit and each open window.
type Budget struct {
	DefaultLimit int            `json:"default_limit"`
	Windows      []BudgetWindow `json:"windows"`
}

// Stats is what GET /_sim/stats returns: every request received, control
// endpoints included, sorted by token, route, method and status, and the
// budgets; the refused requests by the kind of limit that refused them,
// and each principal's CPU-time minutes (clock_stats.go).
type Stats struct {
	Requests   []RequestCount `json:"requests"`
	Budget     Budget         `json:"budget"`
	Refusals   []Refusal      `json:"refusals"`
	CPUMinutes []CPUMinute    `json:"cpu_minutes"`
}

// Stats returns a snapshot of the counts and budgets.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	st := Stats{Requests: []RequestCount{}, Budget: Budget{DefaultLimit: s.defaultLimit, Windows: []BudgetWindow{}},
		Refusals: s.refusalsOf(), CPUMinutes: s.cpuMinutesOf()}
	for k, n := range s.stats {
		st.Requests = append(st.Requests, RequestCount{Token: k.token, Method: k.method, Route: k.route, Status: k.status, Count: n, Points: s.points[k], Seconds: s.took[k].Seconds()})
	}
	slices.SortFunc(st.Requests, func(a, b RequestCount) int {
		return cmp.Or(strings.Compare(a.Token, b.Token), strings.Compare(a.Route, b.Route),
			strings.Compare(a.Method, b.Method), cmp.Compare(a.Status, b.Status))
	})
	for b, w := range s.windows {
		if !now.Before(w.reset) {
			continue
		}
		limit := s.limitOf(b.principal, b.resource)
		st.Budget.Windows = append(st.Budget.Windows, BudgetWindow{
			Token: b.principal, Resource: b.resource, Limit: limit, Used: w.used, Remaining: max(limit-w.used, 0), Reset: w.reset,
		})
	}
	slices.SortFunc(st.Budget.Windows, func(a, b BudgetWindow) int {
		return cmp.Or(strings.Compare(a.Token, b.Token), strings.Compare(a.Resource, b.Resource))
	})
	return st
}

// Filter selects request counts; an empty field matches any value.
type Filter struct {
	Token, Method, Route string
	Status               int
}

// Requests is the number of requests received that match f.
func (s *Sim) Requests(f Filter) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, c := range s.stats {
		if (f.Token == "" || f.Token == k.token) && (f.Method == "" || f.Method == k.method) &&
			(f.Route == "" || f.Route == k.route) && (f.Status == 0 || f.Status == k.status) {
			n += c
		}
	}
	return n
}

// ResetStats forgets every count, refusal, CPU-time minute and pull read;
// budgets and limits' windows are untouched.
func (s *Sim) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.stats)
	clear(s.points)
	clear(s.took)
	clear(s.refusals)
	clear(s.cpuMinutes)
	clear(s.pullReads)
}
