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
// expired or not, and its term is token or none (absent or empty); token ""
// stands for any term, a string.
func owned(name, owner, token string) bson.D {
	return bson.D{
		{Key: fieldName, Value: name},
		{Key: fieldOwner, Value: bson.D{{Key: "$eq", Value: owner}, {Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}},
		{Key: fieldExpires, Value: typed("date")},
		termIs(token),
	}
}

// termIs matches a document whose term is none or token, a string and not
// an array; token "" stands for any string. A term that is absent or the
// empty string is none, as otherTerm reads it and as MemoryStore keeps a
// lease without one: a release of such a lease must delete it, not answer
// success past it. {term: token} alone would also match an array holding
// token.
func termIs(token string) bson.E {
	present := typed("string")
	if token != "" {
		present = append(present, bson.E{Key: "$in", Value: bson.A{token, ""}})
	}
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: fieldTerm, Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: fieldTerm, Value: present}},
	}}
}

// find reads the lease document name and its term ("" when it has none);
// found is false when there is no document. A document of the wrong shape
// is an error wrapping ErrMalformed.
func (s *MongoStore) find(ctx context.Context, op, name string) (h lease.Holder, term string, found bool, err error) {
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: fieldName, Value: name}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return lease.Holder{}, "", false, nil
	}
	if err != nil {
		return lease.Holder{}, "", false, fmt.Errorf("mongolease: %s %q: %w", op, name, err)
	}
	if h, err = decodeLease(raw); err != nil {
		return lease.Holder{}, "", false, err
	}
	term, _ = raw.Lookup(fieldTerm).StringValueOK()
	return h, term, true, nil
}

// otherTerm reports whether a well-formed document's term ("" when absent)
// is not token.
func otherTerm(term, token string) bool { return term != "" && term != token }

// decodeLease reads a lease document, checking every field's type: its
// term, which a Holder does not carry, must be absent or a string too.
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
	if term := raw.Lookup(fieldTerm); !term.IsZero() && term.Type != bson.TypeString {
		return lease.Holder{}, fmt.Errorf("%w: %s is not a string in %s", ErrMalformed, fieldTerm, raw)
	}
	return lease.Holder{Name: name, Owner: owner, Expires: expires.UTC()}, nil
}
