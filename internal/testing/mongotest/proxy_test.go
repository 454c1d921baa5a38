package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"iterion.dev/iterion/internal/testing/mongotest"
)

// opTimeout bounds each operation so that a broken proxy fails a test
// instead of hanging it.
const opTimeout = 20 * time.Second

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// count returns the number of documents matching filter, failing on error.
func count(t *testing.T, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	n, err := coll.CountDocuments(opCtx(t), filter)
	if err != nil {
		t.Fatalf("count %v: %v", filter, err)
	}
	return n
}

func isUpdateOf(coll string) func(mongotest.Command) bool {
	return func(c mongotest.Command) bool { return c.Name == "update" && c.Collection == coll }
}

// TestHoldDelaysOneCommandOthersFlow checks Hold: the matching command is not
// forwarded (its write has not landed) until Release, other connections are
// served meanwhile, and after Release its answer reaches the client.
func TestHoldDelaysOneCommandOthersFlow(t *testing.T) {
	srv := mongotest.NewServer(t)
	db := srv.DB(t)
	coll := db.Collection("held")
	h := srv.Proxy().Hold(isUpdateOf("held"))

	type result struct {
		res *mongo.UpdateResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := coll.UpdateOne(opCtx(t), bson.D{{Key: "_id", Value: "x"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		done <- result{res, err}
	}()
	<-h.Arrived()

	got := h.Command()
	if got.Name != "update" || got.Collection != "held" || got.Database != db.Name() {
		t.Errorf("got command %s %s.%s, want update %s.held: Command names the command, database and collection", got.Name, got.Database, got.Collection, db.Name())
	}
	if id, ok := got.Body.Lookup("updates", "0", "q", "_id").StringValueOK(); !ok || id != "x" {
		t.Errorf("got filter _id %q (found %v), want \"x\": Body includes the updates document sequence", id, ok)
	}
	// Another connection is served while the update is held: the hold
	// does not keep the exchange.
	other := srv.Client(t).Database(db.Name()).Collection("held")
	if n := count(t, other, bson.D{{Key: "_id", Value: "x"}}); n != 0 {
		t.Fatalf("got %d documents while the update is held, want 0: a held command is not forwarded", n)
	}
	h.Release()
	h.Release() // idempotent
	r := <-done
	if r.err != nil || r.res.UpsertedCount != 1 {
		t.Fatalf("got %+v, %v after Release, want one upsert: a released command is forwarded and answered", r.res, r.err)
	}
	<-h.Done()
	if h.Err() != nil {
		t.Fatalf("got Hold.Err %v, want nil: the released command was answered", h.Err())
	}
}

// TestHoldSurvivesCut checks that a command held across a Cut is still
// delivered on Release: the client saw a network error, yet the write lands
// late, as a stalled request's would.
func TestHoldSurvivesCut(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("late")
	h := srv.Proxy().Hold(isUpdateOf("late"))
	done := make(chan error, 1)
	go func() {
		_, err := coll.UpdateOne(opCtx(t), bson.D{{Key: "_id", Value: "x"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
		done <- err
	}()
	<-h.Arrived()
	srv.Proxy().Cut()
	if err := <-done; !mongo.IsNetworkError(err) {
		t.Fatalf("got %v, want a network error: Cut closes the client connection", err)
	}
	if n := count(t, coll, bson.D{{Key: "_id", Value: "x"}}); n != 0 {
		t.Fatalf("got %d documents before Release, want 0: a held command is not forwarded", n)
	}
	h.Release()
	<-h.Done()
	if h.Err() != nil {
		t.Fatalf("got Hold.Err %v, want nil: a command held across a Cut is delivered on Release", h.Err())
	}
	if n := count(t, coll, bson.D{{Key: "_id", Value: "x"}}); n != 1 {
		t.Fatalf("got %d documents after Release, want 1: the late write landed", n)
	}
}

// TestDropAnswerWriteLandsClientErrs checks DropAnswer: the write lands, the
// client gets a network error instead of the answer, and the drop is used
// up: the next matching command is answered.
func TestDropAnswerWriteLandsClientErrs(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("dropped")
	d := srv.Proxy().DropAnswer(func(c mongotest.Command) bool { return c.Name == "insert" && c.Collection == "dropped" })
	_, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: "x"}})
	if !mongo.IsNetworkError(err) {
		t.Fatalf("got %v, want a network error: a dropped answer closes the client connection", err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatalf("Drop.Done not closed after the client saw the error, want closed: Done reports the drop")
	}
	if got := d.Command().Name; got != "insert" {
		t.Errorf("got dropped command %q, want insert", got)
	}
	if n := count(t, coll, bson.D{{Key: "_id", Value: "x"}}); n != 1 {
		t.Fatalf("got %d documents, want 1: the command whose answer was dropped took effect", n)
	}
	if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: "y"}}); err != nil {
		t.Fatalf("got %v for the next matching insert, want it answered: a drop catches one command", err)
	}
}

// TestRefuseFailsUntilLifted checks Refuse: while on, commands fail; once
// lifted, they succeed again.
func TestRefuseFailsUntilLifted(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("refused")
	if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert before the partition: %v", err)
	}
	srv.Proxy().Refuse(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err == nil {
		t.Fatalf("got nil error while refusing, want a failure: Refuse partitions the server")
	}
	srv.Proxy().Refuse(false)
	if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("got %v after Refuse(false), want success: lifting the partition heals it", err)
	}
	if n := count(t, coll, bson.D{{Key: "_id", Value: 2}}); n != 0 {
		t.Fatalf("got %d documents for the refused insert, want 0: a refused command never reached the server", n)
	}
}

// TestRestartBackendKeepsData checks RestartBackend: data written before the
// restart is there after it, and the same client keeps working.
func TestRestartBackendKeepsData(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("kept")
	if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := srv.Proxy().RestartBackend(opCtx(t)); err != nil {
		t.Fatalf("restart: %v", err)
	}
	// The first command after a restart may meet a pooled connection the
	// restart cut; the driver reports that and reconnects.
	n, err := coll.CountDocuments(opCtx(t), bson.D{{Key: "_id", Value: "x"}})
	if err != nil && !mongo.IsNetworkError(err) {
		t.Fatalf("count after restart: %v", err)
	}
	if err != nil {
		n = count(t, coll, bson.D{{Key: "_id", Value: "x"}})
	}
	if n != 1 {
		t.Fatalf("got %d documents after the restart, want 1: RestartBackend keeps data", n)
	}
}

// TestSetDelayAddsLatency checks SetDelay: a round trip takes at least the
// delay.
func TestSetDelayAddsLatency(t *testing.T) {
	srv := mongotest.NewServer(t)
	db := srv.DB(t)
	const d = 300 * time.Millisecond
	srv.Proxy().SetDelay(d)
	start := time.Now()
	if err := db.RunCommand(opCtx(t), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if got := time.Since(start); got < d {
		t.Fatalf("got a round trip of %v, want at least %v: SetDelay adds latency", got, d)
	}
}

// TestCommandsCountsForwarded checks Commands: each command forwarded is
// counted once under its name.
func TestCommandsCountsForwarded(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("counted")
	before := srv.Proxy().Commands()
	for i := range 3 {
		if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	if got := srv.Proxy().Commands()["insert"] - before["insert"]; got != 3 {
		t.Fatalf("got %d inserts counted, want 3: Commands counts each forwarded command", got)
	}
	// A held command is not forwarded yet, so not counted.
	h := srv.Proxy().Hold(func(c mongotest.Command) bool { return c.Name == "insert" })
	done := make(chan error, 1)
	go func() {
		_, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: "held"}})
		done <- err
	}()
	<-h.Arrived()
	if got := srv.Proxy().Commands()["insert"] - before["insert"]; got != 3 {
		t.Errorf("got %d inserts counted while one is held, want 3: a held command is not forwarded yet", got)
	}
	h.Release()
	if err := <-done; err != nil {
		t.Fatalf("released insert: %v", err)
	}
	if got := srv.Proxy().Commands()["insert"] - before["insert"]; got != 4 {
		t.Errorf("got %d inserts counted after the release, want 4: the released command was forwarded", got)
	}
}

// TestUnacknowledgedWriteKeepsExchangesInStep checks moreToCome handling: an
// unacknowledged write (w: 0) gets no answer, yet the next command on the
// same connection gets its own answer, and the write landed.
func TestUnacknowledgedWriteKeepsExchangesInStep(t *testing.T) {
	srv := mongotest.NewServer(t)
	c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()).SetMaxPoolSize(1))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	coll := c.Database("w0").Collection("docs", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	if _, err := coll.InsertOne(opCtx(t), bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatalf("unacknowledged insert: %v", err)
	}
	if n := count(t, c.Database("w0").Collection("docs"), bson.D{{Key: "_id", Value: "x"}}); n != 1 {
		t.Fatalf("got %d documents, want 1: the unacknowledged write landed and the next answer is the count's", n)
	}
}

// TestMalformedClientIsDroppedOthersServed checks that a client sending a
// frame with an impossible length is disconnected, and other clients are
// still served.
func TestMalformedClientIsDroppedOthersServed(t *testing.T) {
	srv := mongotest.NewServer(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.URI(), "mongodb://"), "/?serverMonitoringMode=poll")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0xff, 0xff, 0xff, 0x7f}); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(opTimeout))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("got %d bytes, want the connection closed: a malformed frame ends its connection", n)
	}
	if err := srv.DB(t).RunCommand(opCtx(t), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("got %v, want other clients served after a malformed one", err)
	}
}

// upsert sets v on document id of coll, creating it.
func upsert(ctx context.Context, coll *mongo.Collection, id string) error {
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
	return err
}

// TestHoldsCatchOneCommandEachInArmingOrder pins how armed holds meet
// commands: a hold released before any command arrived is disarmed and
// catches none; of the armed ones the earliest catches the next matching
// command; each catches one command only, so the next goes to the next
// hold, and once none is left a matching command is not held.
func TestHoldsCatchOneCommandEachInArmingOrder(t *testing.T) {
	srv := mongotest.NewServer(t)
	coll := srv.DB(t).Collection("held")
	p := srv.Proxy()
	disarmed := p.Hold(isUpdateOf("held"))
	disarmed.Release()
	first, second := p.Hold(isUpdateOf("held")), p.Hold(isUpdateOf("held"))
	names := map[*mongotest.Hold]string{disarmed: "the disarmed hold", first: "the first hold", second: "the second hold"}
	// The second update arrives while the first is still held; each races
	// the holds not used yet, and the one it meets must be want. (A hold
	// that caught a second command would panic the proxy.)
	other := srv.Client(t).Database(coll.Database().Name()).Collection("held")
	var done []chan error
	for i, tc := range []struct {
		coll    *mongo.Collection
		want    *mongotest.Hold
		pending []*mongotest.Hold
	}{
		{coll, first, []*mongotest.Hold{disarmed, first, second}},
		{other, second, []*mongotest.Hold{disarmed, second}},
	} {
		ch := make(chan error, 1)
		done = append(done, ch)
		go func() { ch <- upsert(opCtx(t), tc.coll, fmt.Sprint(i)) }()
		if got := arrived(tc.pending); got != tc.want {
			t.Fatalf("update %d: caught by %s, want %s: holds catch one command each, earliest armed first, a released one none", i+1, names[got], names[tc.want])
		}
	}
	first.Release()
	second.Release()
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("update %d: got %v after Release, want it answered", i+1, err)
		}
	}
	if err := upsert(opCtx(t), coll, "x"); err != nil {
		t.Fatalf("got %v for an update with every hold used, want it answered unheld", err)
	}
	select {
	case <-disarmed.Done():
		t.Errorf("Done closed for a hold released before any command arrived, want it never closed")
	default:
	}
}

// arrived waits for the first of holds to catch a command and returns it.
func arrived(holds []*mongotest.Hold) *mongotest.Hold {
	caught := make(chan *mongotest.Hold, len(holds))
	stop := make(chan struct{})
	defer close(stop)
	for _, h := range holds {
		go func() {
			select {
			case <-h.Arrived():
				caught <- h
			case <-stop:
			}
		}()
	}
	return <-caught
}

// heldUpsert starts a server whose proxy holds, by arm, an upsert of
// document "x" of collection "held" sent meanwhile; it returns once the
// upsert is held, with what answers it on done.
func heldUpsert(t *testing.T, arm func(*mongotest.Proxy, func(mongotest.Command) bool) *mongotest.Hold) (
	srv *mongotest.Server, coll *mongo.Collection, h *mongotest.Hold, done <-chan error) {
	t.Helper()
	srv = mongotest.NewServer(t)
	coll = srv.DB(t).Collection("held")
	h = arm(srv.Proxy(), isUpdateOf("held"))
	answered := make(chan error, 1)
	go func() { answered <- upsert(opCtx(t), coll, "x") }()
	<-h.Arrived()
	return srv, coll, h, answered
}

// TestDropArmedWhileACommandIsHeld pins when a held command meets the
// drops. One held by Hold (before its queue) meets them when released: a
// drop armed while it is held drops its answer, after its write landed.
// One held by HoldExchange met them before its Arrived closed: a drop
// armed then does not catch it, its answer reaches the client, and the
// drop stays armed for the next matching command.
func TestDropArmedWhileACommandIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arm     func(*mongotest.Proxy, func(mongotest.Command) bool) *mongotest.Hold
		dropped bool
	}{
		{"Hold", (*mongotest.Proxy).Hold, true},
		{"HoldExchange", (*mongotest.Proxy).HoldExchange, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, coll, h, done := heldUpsert(t, tc.arm)
			d := srv.Proxy().DropAnswer(isUpdateOf("held"))
			h.Release()
			err, id := <-done, "x"
			if !tc.dropped {
				if err != nil {
					t.Fatalf("got %v for the released update, want its answer: a HoldExchange's command met the drops before its Arrived closed", err)
				}
				select {
				case <-d.Done():
					t.Fatalf("Drop.Done closed, want the drop armed: it caught no command")
				default:
				}
				id = "y"
				err = upsert(opCtx(t), coll, id)
			}
			if !mongo.IsNetworkError(err) {
				t.Fatalf("got %v, want a network error: the drop catches the first matching command that has not met the drops yet", err)
			}
			<-d.Done()
			if n := count(t, coll, bson.D{{Key: "_id", Value: id}}); n != 1 {
				t.Fatalf("got %d documents, want 1: the update whose answer was dropped landed", n)
			}
		})
	}
}

// TestHoldExchangeArrivesOnceItsCommandMetTheDropsAndHoldsItsQueue pins
// the order behind a HoldExchange's Arrived: it closes only after its
// command has met the armed drops (a drop's match has seen it) and has
// taken its place in its collection's queue (not while another exchange
// keeps that queue), so that a test may rely on both once it is closed.
func TestHoldExchangeArrivesOnceItsCommandMetTheDropsAndHoldsItsQueue(t *testing.T) {
	srv := mongotest.NewServer(t)
	p := srv.Proxy()
	db := srv.DB(t)
	coll := db.Collection("held")
	// A find held inside its exchange keeps the queue of "held".
	find := p.HoldExchange(func(c mongotest.Command) bool { return c.Name == "find" && c.Collection == "held" })
	found := make(chan error, 1)
	go func() { found <- coll.FindOne(opCtx(t), bson.D{}).Err() }()
	<-find.Arrived()

	// A drop that catches nothing: its match reports the update and keeps
	// it there until gate is closed.
	met, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	openGate := sync.OnceFunc(func() { close(gate) })
	defer openGate() // a failure below must not leave the proxy's lock taken
	p.DropAnswer(func(c mongotest.Command) bool {
		if isUpdateOf("held")(c) {
			once.Do(func() { close(met) })
			<-gate
		}
		return false
	})
	h := p.HoldExchange(isUpdateOf("held"))
	done := make(chan error, 1)
	go func() { done <- upsert(opCtx(t), coll, "x") }()
	<-met
	if isClosed(h.Arrived()) {
		t.Fatalf("Arrived closed before the held update met the drops, want it after")
	}
	openGate()
	// The update now waits behind the find; a round trip on another
	// collection gives it time to arrive if it wrongly could.
	count(t, db.Collection("other"), bson.D{})
	if isClosed(h.Arrived()) {
		t.Fatalf("Arrived closed while the held find keeps the update's queue, want it once the update holds its place")
	}
	find.Release()
	if err := <-found; err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("got %v for the released find, want an answer", err)
	}
	<-h.Arrived()
	h.Release()
	if err := <-done; err != nil {
		t.Fatalf("got %v for the released update, want its answer", err)
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestHeldCommandIsNeverForwardedOnceTheServerCloses pins that a command
// still held when its server closes, before its queue (Hold) or inside it
// (HoldExchange), is never forwarded: its Done closes with ErrBackendDown.
func TestHeldCommandIsNeverForwardedOnceTheServerCloses(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(*mongotest.Proxy, func(mongotest.Command) bool) *mongotest.Hold
	}{
		{"Hold", (*mongotest.Proxy).Hold},
		{"HoldExchange", (*mongotest.Proxy).HoldExchange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, h, done := heldUpsert(t, tc.arm)
			srv.Close()
			<-h.Done()
			if err := h.Err(); !errors.Is(err, mongotest.ErrBackendDown) {
				t.Errorf("got Hold.Err %v, want %v: a command held when the server closes is never forwarded", err, mongotest.ErrBackendDown)
			}
			if err := <-done; err == nil {
				t.Errorf("got a nil error for the held update, want a failure: it was never forwarded")
			}
		})
	}
}
