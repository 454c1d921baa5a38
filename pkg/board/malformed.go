package board

import "context"

// malformedKey is the context key WithMalformed keeps its function under.
type malformedKey struct{}

// WithMalformed returns a copy of ctx carrying malformed, which a store
// called with it calls, synchronously, for each stored document it cannot
// read as a card or a tombstone (ErrMalformed) and got past: one Cards
// skipped (once a call), or one Put replaced with the card it was putting.
// id is the document's _id, err wraps ErrMalformed and names the field at
// fault. Only a store that can hold such a document (MongoStore) calls
// it. As with any context value, the innermost WithMalformed's function is
// the one called; net/http/httptrace hands a caller a request's events the
// same way, and gaterun.WithSkipped a run listing's skips.
func WithMalformed(ctx context.Context, malformed func(id string, err error)) context.Context {
	return context.WithValue(ctx, malformedKey{}, malformed)
}

// reportMalformed tells ctx's WithMalformed function, if any, of the
// document id the store got past for err.
func reportMalformed(ctx context.Context, id string, err error) {
	if f, _ := ctx.Value(malformedKey{}).(func(string, error)); f != nil {
		f(id, err)
	}
}
