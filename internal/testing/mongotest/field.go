package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

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

// Valid reports whether doc is BSON well-formed at every depth, as a
// document written through a driver is. bsoncore's Validate checks a
// document's own elements only, not those of the documents and arrays it
// holds, and the driver's streaming decoder allocates a string's length
// as stated, up to 2 GiB, before it finds the bytes missing: a fuzz
// target of a store's decoder skips what is not Valid, which is no
// document.
func Valid(doc []byte) bool {
	d := bsoncore.Document(doc)
	elems, err := d.Elements()
	if err != nil || d.Validate() != nil {
		return false
	}
	for _, e := range elems {
		switch v := e.Value(); v.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if !Valid(v.Data) {
				return false
			}
		case bsoncore.TypeCodeWithScope:
			_, scope, ok := v.CodeWithScopeOK()
			if !ok || !Valid(scope) {
				return false
			}
		}
	}
	return true
}
