// Package mongotokens is the MongoDB twin of forge.MemoryTokenStore: the
// installation tokens of a GitHub App, shared by every replica that uses
// the same database, so each installation's token is minted once for all
// of them.
//
// Security: whoever can read the collection can act as the App on each
// installation until its token expires (an hour after the mint at most).
// Grant read access to the database as to the App's private key's
// holders, or turn sharing off (iterion serve
// --share-installation-tokens=false).
package mongotokens

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"iterion.dev/iterion/internal/mongostore"
	"iterion.dev/iterion/pkg/forge"
)

// Collection is the collection Store keeps tokens in.
const Collection = "installation_tokens"

// Store is the MongoDB forge.TokenStore: collection installation_tokens,
// one document per installation, _id the installation ID in decimal (a
// string), with installation (the ID again, a 64-bit integer), token,
// expires_at, minted_by and minted_at. Safe for concurrent use.
type Store struct {
	coll *mongo.Collection
}

var _ forge.TokenStore = (*Store)(nil)

// NewStore returns a Store on db's installation_tokens collection. It
// sends nothing: the collection is made by the first Put, and its one
// lookup is by _id.
func NewStore(db *mongo.Database) *Store {
	return &Store{coll: db.Collection(Collection)}
}

// Get implements forge.TokenStore.
func (s *Store) Get(ctx context.Context, id int64) (forge.InstallationToken, bool, error) {
	raw, err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: mongostore.DecimalID(id)}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return forge.InstallationToken{}, false, nil
	}
	if err != nil {
		return forge.InstallationToken{}, false, fmt.Errorf("mongotokens: get installation %d's token: %w", id, err)
	}
	tok, err := decode(id, raw)
	if err != nil {
		return forge.InstallationToken{}, false, err
	}
	return tok, true, nil
}

// decode turns installation id's document into its token. Each field is
// read raw and its type checked here, so an error names the field and
// its type and never quotes a value: a token never reaches an error.
func decode(id int64, raw bson.Raw) (forge.InstallationToken, error) {
	tok := forge.InstallationToken{Installation: id}
	malformed := func(field string, v bson.RawValue, want string) error {
		return fmt.Errorf("%w: installation %d: %s is %v, want %s", forge.ErrMalformedToken, id, field, v.Type, want)
	}
	// installation names the token's own installation, so a document
	// copied under another _id is not served for that one. A document
	// without it, as earlier builds wrote, is read as its _id's.
	if v, err := raw.LookupErr("installation"); err == nil {
		n, ok := mongostore.Int64(v)
		if !ok {
			return forge.InstallationToken{}, malformed("installation", v, "an integer")
		}
		if n != id {
			return forge.InstallationToken{}, fmt.Errorf("%w: installation %d: installation is %d, another installation's token", forge.ErrMalformedToken, id, n)
		}
	}
	for _, f := range []struct {
		name string
		str  *string
	}{{"token", &tok.Token}, {"minted_by", &tok.MintedBy}} {
		v := raw.Lookup(f.name)
		s, ok := v.StringValueOK()
		if !ok {
			return forge.InstallationToken{}, malformed(f.name, v, "a string")
		}
		*f.str = s
	}
	exp := raw.Lookup("expires_at")
	e, ok := exp.DateTimeOK()
	if !ok {
		return forge.InstallationToken{}, malformed("expires_at", exp, "a date")
	}
	minted := raw.Lookup("minted_at")
	m, ok := minted.DateTimeOK()
	if !ok {
		return forge.InstallationToken{}, malformed("minted_at", minted, "a date")
	}
	tok.ExpiresAt, tok.MintedAt = bson.DateTime(e).Time().UTC(), bson.DateTime(m).Time().UTC()
	if err := tok.Check(); err != nil {
		return forge.InstallationToken{}, err
	}
	return tok, nil
}

// Put implements forge.TokenStore, in one upserting replace.
func (s *Store) Put(ctx context.Context, tok forge.InstallationToken) error {
	if err := tok.Check(); err != nil {
		return err
	}
	doc := document(tok)
	filter := bson.D{{Key: "_id", Value: mongostore.DecimalID(tok.Installation)}}
	opts := options.Replace().SetUpsert(true)
	_, err := s.coll.ReplaceOne(ctx, filter, doc, opts)
	if mongo.IsDuplicateKeyError(err) {
		// Two first Puts raced and the other inserted: ours replaces it.
		_, err = s.coll.ReplaceOne(ctx, filter, doc, opts)
	}
	if err != nil {
		return fmt.Errorf("mongotokens: put installation %d's token: %w", tok.Installation, err)
	}
	return nil
}

// document is tok's document, as Put writes it and decode reads it.
func document(tok forge.InstallationToken) bson.D {
	return bson.D{
		{Key: "_id", Value: mongostore.DecimalID(tok.Installation)}, {Key: "installation", Value: tok.Installation},
		{Key: "token", Value: tok.Token},
		{Key: "expires_at", Value: mongostore.Stamp(tok.ExpiresAt)},
		{Key: "minted_by", Value: tok.MintedBy}, {Key: "minted_at", Value: mongostore.Stamp(tok.MintedAt)},
	}
}

// Drop implements forge.TokenStore: one delete conditional on the token.
func (s *Store) Drop(ctx context.Context, id int64, token string) error {
	if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: mongostore.DecimalID(id)}, {Key: "token", Value: token}}); err != nil {
		return fmt.Errorf("mongotokens: drop installation %d's token: %w", id, err)
	}
	return nil
}
