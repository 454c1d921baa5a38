package mongotest

import "go.mongodb.org/mongo-driver/v2/bson"

// WithField returns a copy of doc with key's value replaced by v, or with
// key left out when v is nil: one malformed variant of a good document, for
// a store's test that it refuses documents of the wrong shape. doc is not
// modified.
func WithField(doc bson.D, key string, v any) bson.D {
	var d bson.D
	for _, e := range doc {
		if e.Key == key {
			if v == nil {
				continue
			}
			e.Value = v
		}
		d = append(d, e)
	}
	return d
}
