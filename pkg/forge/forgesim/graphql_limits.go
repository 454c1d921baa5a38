package forgesim

import (
	"net/http"
	"strconv"
)

// GraphQLLimitAnswer is how the simulator answers a GraphQL request a rate
// limit refuses. GitHub documents two shapes: over the primary limit "the
// response status will still be 200, but you will receive an error
// message"; over a secondary limit "the response status will be 200 or
// 403" with a message saying so ("Rate limits and query limits for the
// GraphQL API", Exceeding the rate limit:
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api#exceeding-the-rate-limit).
// Clients meet both, so a client under test should be tried with each.
type GraphQLLimitAnswer int

const (
	// GraphQLLimitMixed, the default: the primary limit answers 200 with
	// an error of type RATE_LIMITED, a secondary limit 403 (429 for the
	// concurrency limit) with GitHub's secondary-limit message.
	GraphQLLimitMixed GraphQLLimitAnswer = iota
	// GraphQLLimit200: every limit answers 200 with an errors array: type
	// RATE_LIMITED for the primary limit, the secondary-limit message for
	// a secondary one, which keeps its retry-after header.
	GraphQLLimit200
	// GraphQLLimit403: the primary limit answers 403 with GitHub's
	// rate-limit message too; secondary limits answer as in Mixed.
	GraphQLLimit403
)

var graphqlLimitAnswers = []string{"mixed", "200", "403"}

// String is the answer's flag value: "mixed", "200" or "403".
func (a GraphQLLimitAnswer) String() string {
	if int(a) >= 0 && int(a) < len(graphqlLimitAnswers) {
		return graphqlLimitAnswers[a]
	}
	return "GraphQLLimitAnswer(" + strconv.Itoa(int(a)) + ")"
}

// Set reads a flag value ("mixed", "200" or "403"), so that a
// *GraphQLLimitAnswer is a flag.Value.
func (a *GraphQLLimitAnswer) Set(v string) error {
	for i, name := range graphqlLimitAnswers {
		if v == name {
			*a = GraphQLLimitAnswer(i)
			return nil
		}
	}
	return badField("graphql-limit-answer", v, `want "mixed", "200" or "403"`)
}

// WithGraphQLLimitAnswer sets how GraphQL requests over a rate limit are
// answered (default GraphQLLimitMixed); an unknown value keeps the default.
func WithGraphQLLimitAnswer(a GraphQLLimitAnswer) Option {
	return func(s *Sim) {
		if a >= GraphQLLimitMixed && a <= GraphQLLimit403 {
			s.gqlLimitAnswer = a
		}
	}
}

// shapeGraphQLLimit gives a GraphQL refusal the shape s.gqlLimitAnswer
// asks for. refused marks a refusal by a secondary limit (every refusal
// of a GraphQL request before it runs); the primary limit's refusal is the
// GraphQL handler's free RATE_LIMITED answer.
func (s *Sim) shapeGraphQLLimit(refused bool, rep reply) reply {
	switch {
	case s.gqlLimitAnswer == GraphQLLimit200 && refused:
		msg := "You have exceeded a secondary rate limit."
		if e, ok := rep.body.(githubError); ok {
			msg = e.Message
		}
		return reply{status: http.StatusOK, header: rep.header, free: true, body: gqlAnswer{Errors: []*gqlError{{Message: msg}}}}
	case s.gqlLimitAnswer == GraphQLLimit403 && !refused && isPrimaryRefusal(rep):
		a := rep.body.(gqlAnswer)
		return reply{status: http.StatusForbidden, header: rep.header, free: true, body: githubError{
			Message: a.Errors[0].Message, DocumentationURL: graphqlDoc + "#exceeding-the-rate-limit",
		}}
	}
	return rep
}

// isPrimaryRefusal tells the GraphQL handler's primary-limit refusal.
func isPrimaryRefusal(rep reply) bool {
	a, ok := rep.body.(gqlAnswer)
	return ok && rep.free && len(a.Errors) == 1 && a.Errors[0].Type == "RATE_LIMITED"
}
