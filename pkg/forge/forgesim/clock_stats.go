package forgesim

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"
)

// What the simulator knows of time and refusals that its request counts do
// not say: why each refused request was refused, how much response time
// each principal spent in each of its minutes, and when each pull request
// was read, so that a harness can check a client against GitHub's view
// rather than the client's own.

// Refusal kinds, the limit that refused a request (Refusal.Kind).
const (
	// RefusedPrimary: the hourly budget (REST 403; GraphQL RATE_LIMITED,
	// in whichever shape WithGraphQLLimitAnswer asks).
	RefusedPrimary = "primary"
	// RefusedPoints: a secondary limit's points per minute (REST per
	// endpoint, GraphQL on its endpoint).
	RefusedPoints = "secondary_points"
	// RefusedContent: the content-creation limit, per minute or hour.
	RefusedContent = "secondary_content"
	// RefusedConcurrency: the concurrent-request limit.
	RefusedConcurrency = "concurrency"
	// RefusedCPU: the CPU-time limit (timing.go).
	RefusedCPU = "cpu_time"
	// RefusedInjected: a secondary limit injected by SecondaryLimit.
	RefusedInjected = "injected"
)

// Refusal counts the requests one principal had refused by one kind of
// limit, on one resource ("core" or "graphql").
type Refusal struct {
	Principal string `json:"principal"`
	Resource  string `json:"resource"`
	Kind      string `json:"kind"`
	Count     int64  `json:"count"`
}

// CPUMinute is one principal's CPU-time window, one of the simulator's
// minutes (WithMinute): it opens at the principal's first charged request
// after the last one closed, as the limit's window does (timing.go).
// Seconds is the modelled response time charged in it, REST and GraphQL;
// GraphQLSeconds is GraphQL's part, in its own window (which opens at the
// first GraphQL request, so its Start may differ: each kind is its own
// entry). Both are GitHub's seconds, whatever the minute's length.
type CPUMinute struct {
	Principal string    `json:"principal"`
	Resource  string    `json:"resource"` // "all" or "graphql"
	Start     time.Time `json:"start"`
	Seconds   float64   `json:"seconds"`
}

// refusalKey keys Sim.refusals.
type refusalKey struct{ principal, resource, kind string }

// cpuMinuteKey keys Sim.cpuMinutes: a window by its reset.
type cpuMinuteKey struct {
	principal, resource string
	reset               time.Time
}

// countRefusal counts one refusal of kind; s.mu is held.
func (s *Sim) countRefusal(principal, res, kind string) {
	s.refusals[refusalKey{principal, res, kind}]++
}

// noteCPUMinute adds took to the history of principal's CPU-time minute
// of resource ("all" or "graphql") whose window w is; s.mu is held.
func (s *Sim) noteCPUMinute(principal, resource string, w *secWindow, took time.Duration) {
	s.cpuMinutes[cpuMinuteKey{principal, resource, w.reset}] += took
}

// cpuMinutesOf lists the CPU-time minutes, sorted by principal, resource
// and start; s.mu is held.
func (s *Sim) cpuMinutesOf() []CPUMinute {
	out := make([]CPUMinute, 0, len(s.cpuMinutes))
	for k, d := range s.cpuMinutes {
		out = append(out, CPUMinute{Principal: k.principal, Resource: k.resource, Start: k.reset.Add(-s.minute), Seconds: d.Seconds()})
	}
	slices.SortFunc(out, func(a, b CPUMinute) int {
		return cmp.Or(strings.Compare(a.Principal, b.Principal), strings.Compare(a.Resource, b.Resource), a.Start.Compare(b.Start))
	})
	return out
}

// refusalsOf lists the refusal counts, sorted by principal, resource and
// kind; s.mu is held.
func (s *Sim) refusalsOf() []Refusal {
	out := make([]Refusal, 0, len(s.refusals))
	for k, n := range s.refusals {
		out = append(out, Refusal{Principal: k.principal, Resource: k.resource, Kind: k.kind, Count: n})
	}
	slices.SortFunc(out, func(a, b Refusal) int {
		return cmp.Or(strings.Compare(a.Principal, b.Principal), strings.Compare(a.Resource, b.Resource), strings.Compare(a.Kind, b.Kind))
	})
	return out
}

// PullReads is when one principal read one pull request: the times at
// which the simulator delivered an answer holding it (a GraphQL query
// answered 200 that resolved it, or a REST read of it answered 200, or 304:
// the copy the client kept is current), in order. An answer the client
// never got (a timeout, a 502, a refusal) reads nothing.
type PullReads struct {
	Principal string      `json:"principal"`
	Repo      string      `json:"repo"` // "owner/name", as the repository was seeded
	Number    int         `json:"number"`
	At        []time.Time `json:"at"`
}

// pullRef names a pull request an answer holds.
type pullRef struct {
	repo   string
	number int
}

// readKey keys Sim.pullReads.
type readKey struct {
	principal string
	pull      pullRef
}

// noteReads records that principal got an answer at `at` holding pulls;
// s.mu is held.
func (s *Sim) noteReads(principal string, pulls []pullRef, at time.Time) {
	for _, p := range pulls {
		k := readKey{principal, p}
		s.pullReads[k] = append(s.pullReads[k], at)
	}
}

// Reads returns when principal ("" for every principal) read each pull
// request since the simulator started or its stats were last reset,
// sorted by principal, repository and number.
func (s *Sim) Reads(principal string) []PullReads {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []PullReads{}
	for k, at := range s.pullReads {
		if principal == "" || k.principal == principal {
			out = append(out, PullReads{Principal: k.principal, Repo: k.pull.repo, Number: k.pull.number, At: slices.Clone(at)})
		}
	}
	slices.SortFunc(out, func(a, b PullReads) int {
		return cmp.Or(strings.Compare(a.Principal, b.Principal), strings.Compare(a.Repo, b.Repo), cmp.Compare(a.Number, b.Number))
	})
	return out
}

// ctlReads answers GET /_sim/reads?principal=…: Reads as JSON.
func (s *Sim) ctlReads(r *http.Request) reply {
	return jsonReply(http.StatusOK, s.Reads(r.URL.Query().Get("principal")))
}
