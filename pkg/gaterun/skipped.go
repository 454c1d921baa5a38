package gaterun

import "context"

// skippedKey is the context key WithSkipped keeps its function under.
type skippedKey struct{}

// WithSkipped returns a copy of ctx carrying skipped, which a store's
// listing (Unsettled, UnsettledIn, UnsettledAmong, List) called with it
// calls, synchronously and once a listing, for each stored document it
// skipped because it cannot read it as a run: id is the document's _id,
// err wraps ErrMalformed and names the field at fault. OpenRuns calls it
// once for each installation value that is not an integer, with one of
// the documents that hold it (err says how many). Only a store that
// can hold such a document (MongoStore) calls it. As with any context
// value, the function of the innermost WithSkipped is the one called.
// This is how net/http/httptrace hands a caller a request's events
// without changing the calls that have them.
func WithSkipped(ctx context.Context, skipped func(id string, err error)) context.Context {
	return context.WithValue(ctx, skippedKey{}, skipped)
}

// reportSkipped tells ctx's WithSkipped function, if any, that a listing
// skipped the document id for err.
func reportSkipped(ctx context.Context, id string, err error) {
	if f := skippedFunc(ctx); f != nil {
		f(id, err)
	}
}

// skippedFunc is ctx's WithSkipped function, or nil when it carries none:
// a store asks before it reads anything only to report it.
func skippedFunc(ctx context.Context) func(id string, err error) {
	f, _ := ctx.Value(skippedKey{}).(func(string, error))
	return f
}
