package forgesim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
)

// GraphQLFaults are failures the simulator injects into GraphQL answers,
// apart from the latency model's tail: a harness or a test turns them on
// to show a client loses nothing to them, and off to watch it recover.
type GraphQLFaults struct {
	// BadGatewayShare is the share, 0 to 1, of GraphQL queries answered
	// 502 Bad Gateway after they ran: the query takes its modelled time and
	// is charged its points, and the client gets no data. GitHub documents
	// 502 as an answer to a query it could not finish ("Rate limits and
	// query limits for the GraphQL API", Timeouts:
	// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#timeouts);
	// clients report 502s on heavy queries well under the timeout too
	// (facebook/sapling#782).
	BadGatewayShare float64 `json:"bad_gateway_share"`
	// Seed seeds the draws.
	Seed uint64 `json:"seed"`
}

// Validate names the first bad field of f, wrapping ErrBadRequest.
func (f GraphQLFaults) Validate() error {
	if !(f.BadGatewayShare >= 0 && f.BadGatewayShare <= 1) {
		return badField("bad_gateway_share", fmt.Sprint(f.BadGatewayShare), "must be within 0–1")
	}
	return nil
}

// faultModel is GraphQLFaults with its random source; s.mu guards it.
type faultModel struct {
	GraphQLFaults
	rng *rand.Rand
}

// WithGraphQLFaults injects f's faults into GraphQL answers (default
// none). It panics naming the field when f is invalid (Validate), as a bad
// option is a programming error.
func WithGraphQLFaults(f GraphQLFaults) Option {
	if err := f.Validate(); err != nil {
		panic(fmt.Sprintf("forgesim: WithGraphQLFaults: %v", err))
	}
	return func(s *Sim) { s.faults = faultModel{GraphQLFaults: f, rng: rand.New(rand.NewPCG(f.Seed, 1))} }
}

// SetGraphQLFaults replaces the injected GraphQL faults from now on; the
// zero GraphQLFaults injects none. An invalid f changes nothing and
// returns an error naming the field.
func (s *Sim) SetGraphQLFaults(f GraphQLFaults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faultModel{GraphQLFaults: f, rng: rand.New(rand.NewPCG(f.Seed, 1))}
	return nil
}

// injectFault turns rep, a GraphQL query's answer of 200, into an injected
// 502 for BadGatewayShare of the draws; the points stay charged. Any other
// answer is returned as it is; s.mu is held.
func (s *Sim) injectFault(rep reply) reply {
	if s.faults.BadGatewayShare <= 0 || rep.status != http.StatusOK || rep.free || s.faults.rng.Float64() >= s.faults.BadGatewayShare {
		return rep
	}
	return reply{status: http.StatusBadGateway, points: rep.points, body: githubError{
		Message:          "Server Error",
		DocumentationURL: graphqlDoc + "#timeouts",
	}}
}

// ctlFaults sets the injected GraphQL faults: POST /_sim/faults with
// GraphQLFaults as JSON.
func (s *Sim) ctlFaults(r *http.Request) reply {
	var f GraphQLFaults
	if err := decode(r, &f); err != nil {
		return ctlReply(err)
	}
	return ctlReply(s.SetGraphQLFaults(f))
}

// SetLatency replaces the latency model from now on, as WithLatency sets
// it (a harness or a test ends the model's timeouts with a model without
// a tail); an invalid l changes nothing and returns an error naming the
// field (Validate).
func (s *Sim) SetLatency(l Latency) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	WithLatency(l)(s)
	return nil
}
