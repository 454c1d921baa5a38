package mongotest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// frame builds a wire message: header (opCode) then body.
func frame(op int32, body []byte) []byte {
	msg := make([]byte, headerLen, headerLen+len(body))
	binary.LittleEndian.PutUint32(msg[12:], uint32(op))
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildMsg builds an OP_MSG with flags, a body section and one document
// sequence.
func buildMsg(t testing.TB, flags uint32, body bson.D, seqID string, docs ...bson.D) []byte {
	t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, flags)
	b = append(b, 0)
	b = append(b, mustMarshal(t, body)...)
	if seqID != "" {
		seq := append([]byte(seqID), 0)
		for _, d := range docs {
			seq = append(seq, mustMarshal(t, d)...)
		}
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(4+len(seq)))
		b = append(b, seq...)
	}
	return frame(opMsg, b)
}

// TestReadMessageFraming checks framing: a message is read whole by its
// length prefix, and a prefix outside [16, 48,000,000] (MongoDB's
// maxMessageSizeBytes) or a truncated message is an error, never a short
// read passed on.
func TestReadMessageFraming(t *testing.T) {
	good := frame(opMsg, []byte{1, 2, 3, 4})
	for _, tc := range []struct {
		name    string
		in      []byte
		want    []byte
		wantErr error
	}{
		{"whole message", append(bytes.Clone(good), 9, 9), good, nil},
		{"a header alone, the least length", frame(opMsg, nil), frame(opMsg, nil), nil},
		{"length under the header size", []byte{15, 0, 0, 0}, nil, errWire},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xff}, nil, errWire},
		{"length over maxMessageSizeBytes, 48,000,000", binary.LittleEndian.AppendUint32(nil, 48_000_001), nil, errWire},
		{"truncated body", good[:len(good)-1], nil, io.ErrUnexpectedEOF},
		{"nothing", nil, nil, io.EOF},
	} {
		got, err := readMessage(bytes.NewReader(tc.in))
		if !errors.Is(err, tc.wantErr) || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %v, %v, want %v, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	// The greatest length is allowed: MongoDB's maxMessageSizeBytes is the
	// largest message it accepts.
	largest := make([]byte, maxMessageLen)
	binary.LittleEndian.PutUint32(largest, maxMessageLen)
	if got, err := readMessage(bytes.NewReader(largest)); err != nil || len(got) != maxMessageLen {
		t.Errorf("a message of exactly maxMessageSizeBytes: got %d bytes, %v; want it read whole", len(got), err)
	}
}

// TestParseCommand checks what predicates see: name, database, collection
// and the body with document sequences merged in, for OP_MSG and OP_QUERY;
// unreadable messages give an empty Command.
func TestParseCommand(t *testing.T) {
	update := buildMsg(t, 0, bson.D{{Key: "update", Value: "leases"}, {Key: "$db", Value: "app"}}, "updates",
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}}})
	got := parseCommand(update)
	if got.Name != "update" || got.Database != "app" || got.Collection != "leases" {
		t.Errorf("OP_MSG: got %s %s.%s, want update app.leases", got.Name, got.Database, got.Collection)
	}
	if id, _ := got.Body.Lookup("updates", "0", "q", "_id").StringValueOK(); id != "x" {
		t.Errorf("OP_MSG: got updates.0.q._id %q, want \"x\": sequences are merged into Body", id)
	}
	if err := got.Body.Validate(); err != nil {
		t.Errorf("OP_MSG: merged Body invalid: %v", err)
	}

	q := binary.LittleEndian.AppendUint32(nil, 0)
	q = append(q, "admin.$cmd\x00"...)
	q = append(q, make([]byte, 8)...)
	q = append(q, mustMarshal(t, bson.D{{Key: "isMaster", Value: 1}})...)
	if got := parseCommand(frame(opQuery, q)); got.Name != "isMaster" || got.Database != "admin" {
		t.Errorf("OP_QUERY: got %q on %q, want isMaster on admin", got.Name, got.Database)
	}

	// A checksum (flag checksumPresent) trails the sections; it is no section.
	sum := append(buildMsg(t, flagChecksum, bson.D{{Key: "find", Value: "runs"}, {Key: "$db", Value: "app"}}, ""), 1, 2, 3, 4)
	binary.LittleEndian.PutUint32(sum, uint32(len(sum)))
	if got := parseCommand(sum); got.Name != "find" || got.Collection != "runs" || got.Database != "app" {
		t.Errorf("OP_MSG with a checksum: got %s %s.%s, want find app.runs", got.Name, got.Database, got.Collection)
	}

	for name, msg := range map[string][]byte{
		"unknown opCode":       frame(1, []byte{1, 2, 3}),
		"OP_MSG without body":  frame(opMsg, []byte{0, 0, 0, 0}),
		"OP_MSG bad section":   frame(opMsg, []byte{0, 0, 0, 0, 7}),
		"OP_MSG truncated doc": frame(opMsg, []byte{0, 0, 0, 0, 0, 50, 0, 0, 0}),
		"OP_QUERY truncated":   frame(opQuery, []byte{0, 0, 0, 0, 'a'}),
	} {
		if got := parseCommand(msg); got.Name != "" || got.Body != nil {
			t.Errorf("%s: got %+v, want an empty Command", name, got)
		}
	}
}

// TestMoreToCome checks that only an OP_MSG flagged moreToCome is taken as
// expecting no answer.
func TestMoreToCome(t *testing.T) {
	body := bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}}
	if !moreToCome(buildMsg(t, flagMoreToCome, body, "")) {
		t.Error("got false for a moreToCome OP_MSG, want true")
	}
	if moreToCome(buildMsg(t, 1<<16, body, "")) {
		t.Error("got true for an exhaustAllowed OP_MSG, want false: only moreToCome means no answer")
	}
	// In OP_QUERY's flags the same bit is TailableCursor, which is answered.
	q := binary.LittleEndian.AppendUint32(nil, flagMoreToCome)
	q = append(q, "app.runs\x00"...)
	q = append(q, make([]byte, 8)...)
	q = append(q, mustMarshal(t, bson.D{{Key: "find", Value: "runs"}})...)
	if moreToCome(frame(opQuery, q)) {
		t.Error("got true for an OP_QUERY flagged TailableCursor, want false: only an OP_MSG says moreToCome")
	}
}

// TestQueueKey pins which queue each command takes (see Proxy): its
// database and collection; a getMore's collection from its collection
// field; the handshake, authentication, session and monitoring commands
// none; a command naming no single collection, every queue.
func TestQueueKey(t *testing.T) {
	in := func(db string, cmd bson.D) Command { return describeIn(t, db, cmd) }
	for _, tc := range []struct {
		cmd    Command
		key    string
		scoped bool
	}{
		{in("app", bson.D{{Key: "update", Value: "leases"}}), "app.leases", true},
		{in("other", bson.D{{Key: "update", Value: "leases"}}), "other.leases", true},
		{in("app", bson.D{{Key: "getMore", Value: int64(7)}, {Key: "collection", Value: "gate_runs"}}), "app.gate_runs", true},
		{in("app", bson.D{{Key: "listCollections", Value: 1}}), "", true},
		{in("app", bson.D{{Key: "dropDatabase", Value: 1}}), "", true},
		{in("app", bson.D{{Key: "aggregate", Value: 1}}), "", true},
		{in("admin", bson.D{{Key: "bulkWrite", Value: 1}}), "", true},
		{in("admin", bson.D{{Key: "hello", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "isMaster", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "ismaster", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "ping", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "saslStart", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "saslContinue", Value: 1}}), "", false},
		{in("admin", bson.D{{Key: "endSessions", Value: bson.A{}}}), "", false},
		{in("admin", bson.D{{Key: "buildInfo", Value: 1}}), "", false},
	} {
		if key, scoped := tc.cmd.queueKey(); key != tc.key || scoped != tc.scoped {
			t.Errorf("%s on %s: got queue %q (scoped %v), want %q (scoped %v)", tc.cmd.Name, tc.cmd.Database, key, scoped, tc.key, tc.scoped)
		}
	}
}

// describeIn is the Command of an OP_MSG sending cmd to database db.
func describeIn(t *testing.T, db string, cmd bson.D) Command {
	return parseCommand(buildMsg(t, 0, append(cmd, bson.E{Key: "$db", Value: db}), ""))
}

// FuzzParseCommand checks that no message, however malformed, makes
// parseCommand panic: the proxy forwards what it cannot read.
func FuzzParseCommand(f *testing.F) {
	f.Add(buildMsg(f, 0, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "d"}}, "documents", bson.D{{Key: "a", Value: 1}}))
	f.Add(frame(opQuery, []byte{0, 0, 0, 0, 'a', 0}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) < headerLen {
			return
		}
		cmd := parseCommand(msg)
		if cmd.Body != nil {
			_ = cmd.Body.String()
		}
	})
}
