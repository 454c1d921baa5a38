package mongotest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// errWire reports a wire message the proxy cannot frame: a length prefix
// outside the protocol's bounds.
var errWire = errors.New("mongotest: malformed wire message")

// Wire protocol constants (MongoDB wire protocol, "Standard Message Header"
// and OP_MSG: https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/).
// maxMessageLen is MongoDB's maxMessageSizeBytes, "48000000
// bytes" (https://www.mongodb.com/docs/manual/reference/command/hello/),
// which FerretDB announces too: decimal, not 48 MiB.
const (
	headerLen      = 16
	maxMessageLen  = 48_000_000
	opQuery        = 2004
	opMsg          = 2013
	flagChecksum   = 1 << 0
	flagMoreToCome = 1 << 1
)

// Command is what the proxy understands of one client request; fault
// predicates match on it. Values are copies the predicate may keep.
type Command struct {
	// Name is the command: the first key of the command document
	// ("update", "find", "insert", "hello", ...).
	Name string
	// Database is the command's database ($db, or the namespace prefix of
	// a legacy OP_QUERY command).
	Database string
	// Collection is the value of the command's first key when that is a
	// string ("leases" in {update: "leases", ...}), else empty.
	Collection string
	// Body is the logical command document: OP_MSG section 0 with each
	// document sequence (kind 1, e.g. "updates") appended as an array field
	// of that name, so Body.Lookup("updates", "0", "q") finds a filter.
	// Empty when the message is neither OP_MSG nor OP_QUERY.
	Body bson.Raw
}

// readMessage reads one length-prefixed wire message, header included.
func readMessage(r io.Reader) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.LittleEndian.Uint32(prefix[:])))
	if n < headerLen || n > maxMessageLen {
		return nil, fmt.Errorf("%w: length %d", errWire, n)
	}
	msg := make([]byte, n)
	copy(msg, prefix[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// opCode returns a framed message's opCode.
func opCode(msg []byte) int32 {
	return int32(binary.LittleEndian.Uint32(msg[12:16]))
}

// moreToCome reports whether an OP_MSG request says its client expects no
// answer. The same bit of an OP_QUERY's flags is TailableCursor, which is
// answered.
func moreToCome(msg []byte) bool {
	return opCode(msg) == opMsg && len(msg) >= headerLen+4 &&
		binary.LittleEndian.Uint32(msg[headerLen:])&flagMoreToCome != 0
}

// parseCommand extracts the Command of a framed request. A message it cannot
// read yields a Command with only what could be read (possibly nothing): the
// proxy forwards bytes, it does not validate them; the server answers.
func parseCommand(msg []byte) Command {
	switch opCode(msg) {
	case opMsg:
		return parseOpMsg(msg)
	case opQuery:
		return parseOpQuery(msg)
	}
	return Command{}
}

func parseOpMsg(msg []byte) Command {
	if len(msg) < headerLen+4 {
		return Command{}
	}
	flags := binary.LittleEndian.Uint32(msg[headerLen:])
	rest := msg[headerLen+4:]
	if flags&flagChecksum != 0 && len(rest) >= 4 {
		rest = rest[:len(rest)-4]
	}
	var body bsoncore.Document
	var seqs []byte // array elements, one per document sequence
	for len(rest) > 0 {
		kind := rest[0]
		rest = rest[1:]
		switch kind {
		case 0:
			doc, r, ok := bsoncore.ReadDocument(rest)
			if !ok {
				return Command{}
			}
			body, rest = doc, r
		case 1:
			size, _, ok := bsoncore.ReadLength(rest)
			if !ok || size < 4 || int(size) > len(rest) {
				return Command{}
			}
			seq := rest[4:size]
			rest = rest[size:]
			id, docs, ok := bsoncore.ReadKey(seq) // the identifier cstring
			if !ok {
				return Command{}
			}
			var vals []bsoncore.Value
			for len(docs) > 0 {
				doc, r, ok := bsoncore.ReadDocument(docs)
				if !ok {
					return Command{}
				}
				vals = append(vals, bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc})
				docs = r
			}
			seqs = bsoncore.BuildArrayElement(seqs, id, vals...)
		default:
			return Command{}
		}
	}
	if body == nil {
		return Command{}
	}
	cmd := describe(body)
	if db, ok := body.Lookup("$db").StringValueOK(); ok {
		cmd.Database = db
	}
	if seqs != nil {
		// Splice the sequences in before the body's terminating zero byte.
		merged := make([]byte, 0, len(body)+len(seqs))
		merged = append(merged, body[:len(body)-1]...)
		merged = append(merged, seqs...)
		merged = append(merged, 0)
		binary.LittleEndian.PutUint32(merged, uint32(len(merged)))
		cmd.Body = bson.Raw(merged)
	}
	return cmd
}

func parseOpQuery(msg []byte) Command {
	// flags int32, fullCollectionName cstring, numberToSkip int32,
	// numberToReturn int32, query document.
	if len(msg) < headerLen+4 {
		return Command{}
	}
	ns, rest, ok := bsoncore.ReadKey(msg[headerLen+4:])
	if !ok || len(rest) < 8 {
		return Command{}
	}
	doc, _, ok := bsoncore.ReadDocument(rest[8:])
	if !ok {
		return Command{}
	}
	cmd := describe(doc)
	if i := bytes.IndexByte([]byte(ns), '.'); i >= 0 {
		cmd.Database = ns[:i]
	}
	return cmd
}

// describe fills Name, Collection and Body (a copy) from a command document.
func describe(doc bsoncore.Document) Command {
	cmd := Command{Body: bson.Raw(bytes.Clone(doc))}
	first, err := doc.IndexErr(0)
	if err != nil {
		return cmd
	}
	cmd.Name = first.Key()
	if coll, ok := first.Value().StringValueOK(); ok {
		cmd.Collection = coll
	}
	return cmd
}

// unqueued are the commands of the connection handshake, authentication,
// sessions and server monitoring: they read and write no collection, so
// they need no place in an exchange queue.
var unqueued = map[string]bool{
	"hello": true, "isMaster": true, "ismaster": true, "ping": true,
	"buildInfo": true, "buildinfo": true, "getParameter": true, "hostInfo": true,
	"saslStart": true, "saslContinue": true, "authenticate": true, "logout": true,
	"connectionStatus": true, "whatsmyuri": true, "getCmdLineOpts": true,
	"endSessions": true, "killSessions": true, "startSession": true,
}

// queueKey names the queue the proxy serialises c in: "database.collection"
// for a command on one collection (a getMore names its collection in its
// "collection" field). scoped is false for the commands that touch no
// collection; a scoped command with an empty key names no single collection
// and must run alone.
func (c Command) queueKey() (key string, scoped bool) {
	if unqueued[c.Name] {
		return "", false
	}
	coll := c.Collection
	if c.Name == "getMore" {
		coll, _ = c.Body.Lookup("collection").StringValueOK()
	}
	if coll == "" {
		return "", true
	}
	return c.Database + "." + coll, true
}
