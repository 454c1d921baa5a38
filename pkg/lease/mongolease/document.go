// The lease document: the filters that match it and how it is read.

package mongolease

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"iterion.dev/iterion/pkg/lease"
)

// typed matches a field of the BSON type bsonType that is not an array:
// {$type: t} alone also matches an array that holds a t.
func typed(bsonType string) bson.D {
	return bson.D{
		{Key: "$type", Value: bsonType},
		{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}},
	}
}

// owned matches the lease document name when it is well-formed and owner's,
// expired or not.
func owned(name, owner string) bson.D {
	return bson.D{
		{Key: fieldName, Value: name},
		{Key: fieldOwner, Value: bson.D{{Key: "$eq", Value: owner}, {Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}},
		{Key: fieldExpires, Value: typed("date")},
	}
}

// find reads the lease document name and its term (zero when it has none);
// found is false when there is no document.
func (s *MongoStore) find(ctx context.Context, op, name string) (h lease.Holder, term bson.RawValue, found bool, err error) {
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: fieldName, Value: name}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return lease.Holder{}, term, false, nil
	}
	if err != nil {
		return lease.Holder{}, term, false, fmt.Errorf("mongolease: %s %q: %w", op, name, err)
	}
	h, err = decodeLease(raw)
	return h, raw.Lookup(fieldTerm), err == nil, err
}

// otherTerm reports whether a document's term (zero when absent) is not
// token: a term of any other value or type.
func otherTerm(term bson.RawValue, token string) bool {
	if term.IsZero() {
		return false
	}
	got, ok := term.StringValueOK()
	return !ok || got != token
}

// decodeLease reads a lease document, checking every field's type.
func decodeLease(raw bson.Raw) (lease.Holder, error) {
	name, ok := raw.Lookup(fieldName).StringValueOK()
	if !ok {
		return lease.Holder{}, fmt.Errorf("%w: %s is not a string in %s", ErrMalformed, fieldName, raw)
	}
	owner, ok := raw.Lookup(fieldOwner).StringValueOK()
	if !ok {
		return lease.Holder{}, fmt.Errorf("%w: %s is not a string in %s", ErrMalformed, fieldOwner, raw)
	}
	expires, ok := raw.Lookup(fieldExpires).TimeOK()
	if !ok {
		return lease.Holder{}, fmt.Errorf("%w: %s is not a date in %s", ErrMalformed, fieldExpires, raw)
	}
	return lease.Holder{Name: name, Owner: owner, Expires: expires.UTC()}, nil
}
