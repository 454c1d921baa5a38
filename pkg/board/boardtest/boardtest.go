// Package boardtest is the conformance suite for board.Store:
// any store, ours or a user's, proves itself with one line,
//
//	func TestConformance(t *testing.T) { boardtest.Run(t, newStore) }
//
// Each case runs as a subtest on a fresh store and treats it as a black box.
package boardtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/internal/conformance"
	"iterion.dev/iterion/pkg/board"
)

// Run runs every conformance case against a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) board.Store) {
	t.Helper()
	conformance.Run(t, cases, newStore)
}

// base is the suite's clock origin; it has sub-millisecond digits on
// purpose, so truncation shows.
var base = time.Date(2026, 9, 30, 9, 0, 0, 123456789, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// ms is t as stores keep it.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// newCard returns a valid card for issue n of repo, updated at u.
func newCard(repo string, n int, u time.Time) board.Card {
	return board.Card{
		Host: "github.com", Repo: repo, Number: n, Title: fmt.Sprintf("issue %d", n), State: "open",
		Labels: []string{"bug", "p1"}, Assignees: []string{"ana"},
		URL: fmt.Sprintf("https://github.com/%s/issues/%d", repo, n), Updated: u,
	}
}

func put(t *testing.T, s board.Store, c board.Card) bool {
	t.Helper()
	changed, err := s.Put(context.Background(), c)
	if err != nil {
		t.Fatalf("Put(%s): %v", c.ID(), err)
	}
	return changed
}

// all returns every card of the store, in its order.
func all(t *testing.T, s board.Store, q board.Query) []board.Card {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 1000
	}
	cards, err := s.Cards(context.Background(), q)
	if err != nil {
		t.Fatalf("Cards(%+v): %v", q, err)
	}
	return cards
}

// one returns the stored card with c's ID, failing when there is none.
func one(t *testing.T, s board.Store, c board.Card) board.Card {
	t.Helper()
	for _, got := range all(t, s, board.Query{Host: c.Host, Repo: c.Repo}) {
		if got.ID() == c.ID() {
			return got
		}
	}
	t.Fatalf("card %s not stored", c.ID())
	return board.Card{}
}

func ids(cards []board.Card) []string {
	out := make([]string, len(cards))
	for i, c := range cards {
		out[i] = c.ID()
	}
	return out
}

// same reports whether a and b are equal card for card, field for field.
func same(a, b board.Card) bool {
	return a.Host == b.Host && a.Repo == b.Repo && a.Number == b.Number && a.Title == b.Title &&
		a.State == b.State && slices.Equal(a.Labels, b.Labels) && slices.Equal(a.Assignees, b.Assignees) &&
		a.PullRequest == b.PullRequest && a.URL == b.URL && a.Updated.Equal(b.Updated)
}

var cases = []conformance.Case[board.Store]{
	{Name: "PutReportsChange", Rule: "Put reports changed for a new card and for a changed field, not for the same card again", Check: func(t *testing.T, s board.Store) {
		c := newCard("acme/app", 1, at(0))
		if !put(t, s, c) {
			t.Errorf("first Put changed = false, want true: a new card is a change")
		}
		if put(t, s, c) {
			t.Errorf("same Put again changed = true, want false: the same card is no change")
		}
		again := c
		again.Labels = slices.Clone(c.Labels) // equal contents in another slice
		again.Updated = c.Updated.Add(time.Microsecond)
		if put(t, s, again) {
			t.Errorf("Put of equal lists at the same millisecond changed = true, want false: cards compare by value, instants to the millisecond")
		}
		c.State, c.Updated = "closed", at(time.Minute)
		if !put(t, s, c) {
			t.Errorf("Put of a closed card changed = false, want true: a changed field is a change")
		}
		if got := one(t, s, c); got.State != "closed" || !got.Updated.Equal(ms(at(time.Minute))) {
			t.Errorf("got state %q updated %v, want closed at %v: the change is stored", got.State, got.Updated, ms(at(time.Minute)))
		}
	}},
	{Name: "RoundTrip", Rule: "every field of a stored card reads back as stored, Updated in UTC to the millisecond, empty lists as nil", Check: func(t *testing.T, s board.Store) {
		c := newCard("acme/app", 7, at(0).In(time.FixedZone("x", 3600)))
		c.PullRequest = true
		put(t, s, c)
		got := one(t, s, c)
		want := c
		want.Updated = ms(at(0))
		if !same(got, want) || got.Updated.Location() != time.UTC {
			t.Errorf("got %+v, want %+v in UTC: a card reads back as stored", got, want)
		}
		bare := newCard("acme/app", 8, at(0))
		bare.Labels, bare.Assignees, bare.URL, bare.Title = []string{}, nil, "", ""
		put(t, s, bare)
		if got := one(t, s, bare); got.Labels != nil || got.Assignees != nil || got.URL != "" || got.Title != "" {
			t.Errorf("got labels %#v assignees %#v url %q title %q, want nil, nil, empty, empty: empty lists read back as nil", got.Labels, got.Assignees, got.URL, got.Title)
		}
	}},
	{Name: "NewerNeverOverwritten", Rule: "a card updated earlier than the stored one changes nothing; one updated at the same instant replaces it", Check: func(t *testing.T, s board.Store) {
		newer := newCard("acme/app", 2, at(time.Hour))
		newer.Title = "newer"
		put(t, s, newer)
		older := newCard("acme/app", 2, at(0))
		older.Title = "older"
		if put(t, s, older) {
			t.Errorf("Put of an older read changed = true, want false: an older read never overwrites a newer one")
		}
		if got := one(t, s, newer); got.Title != "newer" {
			t.Errorf("got title %q, want newer: an older read never overwrites a newer one", got.Title)
		}
		tie := newer
		tie.Title = "edited within the same second"
		if !put(t, s, tie) {
			t.Errorf("Put at the stored instant with another title changed = false, want true: the forge's instants have seconds, so two edits can share one")
		}
		if got := one(t, s, newer); got.Title != tie.Title {
			t.Errorf("got title %q, want %q: a card at the same instant replaces the stored one", got.Title, tie.Title)
		}
	}},
	{Name: "PutRefusesInvalid", Rule: "a card Validate refuses is ErrInvalid and nothing is written", Check: func(t *testing.T, s board.Store) {
		for _, bad := range []func(*board.Card){
			func(c *board.Card) { c.Host = "" },
			func(c *board.Card) { c.Host = "git/hub" },
			func(c *board.Card) { c.Repo = "no-slash" },
			func(c *board.Card) { c.Number = 0 },
			func(c *board.Card) { c.State = "merged" },
			func(c *board.Card) { c.Updated = time.Time{} },
		} {
			c := newCard("acme/app", 3, at(0))
			bad(&c)
			if _, err := s.Put(context.Background(), c); !errors.Is(err, board.ErrInvalid) {
				t.Errorf("Put(%+v) = %v, want ErrInvalid: invalid cards are refused", c, err)
			}
		}
		if got := all(t, s, board.Query{}); len(got) != 0 {
			t.Errorf("got cards %v after refused puts, want none: nothing is written", ids(got))
		}
	}},
	{Name: "CardsOrderFilterLimit", Rule: "Cards lists the most recently updated first, ties by ID, filtered by host, repo and state, at most Limit", Check: func(t *testing.T, s board.Store) {
		a1, a2, a3 := newCard("acme/app", 1, at(0)), newCard("acme/app", 2, at(time.Hour)), newCard("acme/app", 3, at(time.Hour))
		a3.State = "closed"
		lib := newCard("acme/lib", 1, at(2*time.Hour))
		ghe := newCard("acme/app", 1, at(3*time.Hour))
		ghe.Host = "ghe.example"
		for _, c := range []board.Card{a1, a2, a3, lib, ghe} {
			put(t, s, c)
		}
		tie := []string{a2.ID(), a3.ID()}
		slices.Sort(tie)
		for _, tc := range []struct {
			q    board.Query
			want []string
			rule string
		}{
			{board.Query{}, append(append([]string{ghe.ID(), lib.ID()}, tie...), a1.ID()), "newest first, ties by ID"},
			{board.Query{Host: "github.com", Repo: "acme/app"}, append(slices.Clone(tie), a1.ID()), "one repo of one host"},
			{board.Query{Host: "github.com", Repo: "ACME/App"}, append(slices.Clone(tie), a1.ID()), "names compare without regard to case, as on GitHub"},
			{board.Query{Host: "github.com", Repo: "acme/ap."}, nil, "the name is matched literally, whole"},
			{board.Query{Repo: "acme/app", State: "open"}, []string{ghe.ID(), a2.ID(), a1.ID()}, "open cards of a repo on any host"},
			{board.Query{State: "closed"}, []string{a3.ID()}, "closed cards"},
			{board.Query{Limit: 2}, []string{ghe.ID(), lib.ID()}, "at most Limit, the newest"},
		} {
			if got := ids(all(t, s, tc.q)); !slices.Equal(got, tc.want) {
				t.Errorf("Cards(%+v) = %v, want %v: %s", tc.q, got, tc.want, tc.rule)
			}
		}
	}},
	{Name: "OneCardWhateverTheCase", Rule: "a card is keyed by its repository lower-cased, as GitHub compares names: a Put under another spelling is the same card, showing the name last put", Check: func(t *testing.T, s board.Store) {
		first := newCard("Acme/App", 9, at(0))
		put(t, s, first)
		if got, want := first.ID(), "github.com/acme/app#9"; got != want {
			t.Fatalf("ID of %s#9: got %q, want %q: the repository enters the ID lower-cased", first.Repo, got, want)
		}
		again := newCard("acme/app", 9, at(0))
		if !put(t, s, again) {
			t.Errorf("Put under another spelling changed = false, want true: the name shown changed")
		}
		if put(t, s, again) {
			t.Errorf("same Put again changed = true, want false: it is the card just stored")
		}
		got := all(t, s, board.Query{})
		if len(got) != 1 || got[0].Repo != "acme/app" || got[0].ID() != first.ID() {
			t.Errorf("cards after puts as Acme/App and acme/app: got %+v, want one, as acme/app: names differing only in case are one repository", got)
		}
	}},
	{Name: "RemoveDeletesOneCard", Rule: "Remove deletes the card of one issue, its repository named in any case, and says whether there was one", Check: func(t *testing.T, s board.Store) {
		keep, gone := newCard("acme/app", 1, at(0)), newCard("Acme/App", 2, at(0))
		put(t, s, keep)
		put(t, s, gone)
		removed, err := s.Remove(context.Background(), "github.com", "ACME/app", 2, at(time.Hour))
		if err != nil || !removed {
			t.Fatalf("Remove of a stored card = %v, %v, want true, nil", removed, err)
		}
		if got := ids(all(t, s, board.Query{})); !slices.Equal(got, []string{keep.ID()}) {
			t.Errorf("cards after Remove: got %v, want %v: only the removed issue's card goes", got, []string{keep.ID()})
		}
		if removed, err := s.Remove(context.Background(), "github.com", "acme/app", 2, at(time.Hour)); err != nil || removed {
			t.Errorf("Remove again = %v, %v, want false, nil: there is no card left to remove", removed, err)
		}
		for _, bad := range []struct {
			host, repo string
			number     int
			gone       time.Time
		}{{"", "acme/app", 1, at(0)}, {"github.com", "acme", 1, at(0)}, {"github.com", "acme/app", 0, at(0)}, {"github.com", "acme/app", 1, time.Time{}}} {
			if _, err := s.Remove(context.Background(), bad.host, bad.repo, bad.number, bad.gone); !errors.Is(err, board.ErrInvalid) {
				t.Errorf("Remove(%q, %q, %d, %v) = %v, want ErrInvalid: a key no card can have, or no time of removal, is refused", bad.host, bad.repo, bad.number, bad.gone, err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Remove(ctx, "github.com", "acme/app", 1, at(time.Hour)); err == nil {
			t.Errorf("Remove on a done context = nil, want an error")
		}
		if got := ids(all(t, s, board.Query{})); !slices.Equal(got, []string{keep.ID()}) {
			t.Errorf("cards after refused removes: got %v, want %v: nothing is removed", got, []string{keep.ID()})
		}
	}},
	{Name: "RemovedCardStaysRemoved", Rule: "after Remove at gone, a Put of the card updated at or before gone, or before the card removed, changes nothing; one updated later stores it again", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		c := newCard("acme/app", 1, at(0))
		put(t, s, c)
		if removed, err := s.Remove(ctx, "github.com", "acme/app", 1, at(time.Minute)); err != nil || !removed {
			t.Fatalf("Remove = %v, %v, want true, nil", removed, err)
		}
		for _, u := range []struct {
			at  time.Time
			why string
		}{
			{at(0), "the read the card removed was made from"},
			{at(time.Minute), "a read updated at the removal's instant"},
			{at(time.Minute + 500*time.Microsecond), "a read in the removal's millisecond, as the stores keep instants"},
		} {
			old := c
			old.Updated, old.Title = u.at, "read before the removal"
			if put(t, s, old) {
				t.Errorf("Put of %s changed = true, want false: a read from before the removal does not put a removed card back", u.why)
			}
		}
		if got := ids(all(t, s, board.Query{})); len(got) != 0 {
			t.Fatalf("cards after older puts: got %v, want none: the removed card stays removed", got)
		}
		newer := c
		newer.Updated, newer.Title = at(2*time.Minute), "updated after the removal"
		if !put(t, s, newer) || one(t, s, newer).Title != newer.Title {
			t.Errorf("Put of a read updated after the removal: not stored, want it stored: only older reads are refused")
		}
		if removed, err := s.Remove(ctx, "github.com", "acme/app", 1, at(3*time.Minute)); err != nil || !removed {
			t.Errorf("Remove of the card put back = %v, %v, want true: it is a card again, not a tombstone", removed, err)
		}

		never := newCard("acme/app", 2, at(30*time.Minute))
		if removed, err := s.Remove(ctx, "github.com", "Acme/App", 2, at(time.Hour)); err != nil || removed {
			t.Fatalf("Remove of a card never stored = %v, %v, want false, nil", removed, err)
		}
		if removed, err := s.Remove(ctx, "github.com", "acme/app", 2, at(0)); err != nil || removed {
			t.Fatalf("Remove of it again, earlier = %v, %v, want false, nil: a tombstone is no card", removed, err)
		}
		if put(t, s, never) {
			t.Errorf("Put of a card removed before it was stored changed = true, want false: the pass that read it may store it after the removal, and the later of two removals counts")
		}

		late := newCard("acme/app", 3, at(2*time.Hour))
		put(t, s, late)
		if _, err := s.Remove(ctx, "github.com", "acme/app", 3, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		late.Updated = at(90 * time.Minute)
		if put(t, s, late) {
			t.Errorf("Put of a read after gone but before the card removed changed = true, want false: the removal refuses reads older than the card it removed")
		}
		if got := ids(all(t, s, board.Query{})); len(got) != 0 {
			t.Errorf("cards: got %v, want none: Cards never lists a tombstone", got)
		}
	}},
	{Name: "RemovedCardBackFromTheNextMillisecond", Rule: "after Remove at gone, a Put of the card updated in the millisecond after gone's, the stores' precision, stores it again: only reads at or before gone are refused", Check: func(t *testing.T, s board.Store) {
		c := newCard("acme/app", 1, at(0))
		put(t, s, c)
		if _, err := s.Remove(context.Background(), "github.com", "acme/app", 1, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		back := c
		back.Updated, back.Title = ms(at(time.Minute)).Add(time.Millisecond), "reopened a millisecond after"
		if !put(t, s, back) || one(t, s, back).Title != back.Title {
			t.Errorf("Put of a read updated the millisecond after the removal: not stored, want it stored: an issue updated after it went is on the forge again")
		}
	}},
	{Name: "TombstoneOfExactlyTheTTLIsKept", Rule: "a tombstone whose gone is exactly TombstoneTTL before a Remove's gone or ExpireTombstones' now is kept: only those more than TombstoneTTL old are dropped", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		for _, n := range []int{1, 2} {
			if _, err := s.Remove(ctx, "github.com", "acme/app", n, at(0)); err != nil {
				t.Fatalf("Remove(%d): %v", n, err)
			}
		}
		if dropped, err := s.ExpireTombstones(ctx, at(board.TombstoneTTL)); err != nil || dropped != 0 {
			t.Errorf("ExpireTombstones exactly TombstoneTTL after the removals = %d, %v, want 0, nil: a tombstone of exactly the TTL is kept", dropped, err)
		}
		if _, err := s.Remove(ctx, "github.com", "acme/app", 3, at(board.TombstoneTTL)); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2} {
			if put(t, s, newCard("acme/app", n, at(-time.Hour))) {
				t.Errorf("Put of an older read of card %d changed = true, want false: its tombstone, exactly TombstoneTTL old, is kept", n)
			}
		}
	}},
	{Name: "TombstonesExpire", Rule: "a Remove drops the tombstones of removals more than TombstoneTTL before its own, and only those", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		remove := func(n int, gone time.Time) {
			t.Helper()
			if _, err := s.Remove(ctx, "github.com", "acme/app", n, gone); err != nil {
				t.Fatalf("Remove(%d): %v", n, err)
			}
		}
		remove(1, at(0))
		remove(2, at(time.Hour))
		old := newCard("acme/app", 1, at(-time.Hour))
		if put(t, s, old) {
			t.Fatalf("Put of an older read of card 1 changed = true, want false: its tombstone is kept")
		}
		remove(3, at(board.TombstoneTTL+time.Minute))
		if !put(t, s, old) {
			t.Errorf("Put of card 1 after a removal TombstoneTTL and a minute after its own changed = false, want true: its tombstone was dropped, so tombstones do not pile up")
		}
		if put(t, s, newCard("acme/app", 2, at(time.Hour))) {
			t.Errorf("Put of card 2, removed under TombstoneTTL before the last removal, changed = true, want false: its tombstone is kept")
		}
	}},
	{Name: "ExpireTombstonesByAge", Rule: "ExpireTombstones drops the tombstones of removals more than TombstoneTTL before now, and only those, with no Remove; cards stay", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		for _, r := range []struct {
			n    int
			gone time.Time
		}{{1, at(0)}, {2, at(time.Hour)}} {
			if _, err := s.Remove(ctx, "github.com", "acme/app", r.n, r.gone); err != nil {
				t.Fatalf("Remove(%d): %v", r.n, err)
			}
		}
		kept := newCard("acme/app", 3, at(-time.Hour))
		put(t, s, kept)
		dropped, err := s.ExpireTombstones(ctx, at(board.TombstoneTTL+time.Minute))
		if err != nil || dropped != 1 {
			t.Fatalf("ExpireTombstones a TombstoneTTL and a minute after the first removal = %d, %v, want 1, nil: the first removal's tombstone expired, the second's not", dropped, err)
		}
		if !put(t, s, newCard("acme/app", 1, at(-time.Hour))) {
			t.Errorf("Put of an older read of card 1 after ExpireTombstones changed = false, want true: its tombstone was dropped without another removal")
		}
		if put(t, s, newCard("acme/app", 2, at(-time.Hour))) {
			t.Errorf("Put of an older read of card 2 changed = true, want false: its tombstone, under TombstoneTTL old, is kept")
		}
		if got := ids(all(t, s, board.Query{})); len(got) != 2 || !slices.Contains(got, kept.ID()) {
			t.Errorf("cards after ExpireTombstones: got %v, want card 1 put back and card 3 kept: no card is expired", got)
		}
		if _, err := s.ExpireTombstones(ctx, time.Time{}); !errors.Is(err, board.ErrInvalid) {
			t.Errorf("ExpireTombstones(zero) = %v, want ErrInvalid: no instant to count from", err)
		}
	}},
	{Name: "ClaimPruneOncePerPeriod", Rule: "ClaimPrune grants a host's claim once a period per board, at once for another board, and refuses a claim the last one is within every of; a last claim more than every ahead is taken over", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		const a, b = "board-a", "board-b"
		for i, step := range []struct {
			host, board string
			at          time.Time
			want        bool
			why         string
		}{
			{"github.com", a, at(0), true, "the first claim of a host is granted"},
			{"github.com", a, at(59 * time.Minute), false, "a claim of the same board within the period is refused"},
			{"ghe.example", a, at(59 * time.Minute), true, "another host's claim is its own"},
			{"github.com", a, at(time.Hour), true, "a claim a period after the last is granted"},
			{"github.com", a, at(30 * time.Minute), false, "a claim before the last one (a clock behind) is refused"},
			{"github.com", b, at(61 * time.Minute), true, "a claim for another board is granted at once: its list changed"},
			{"github.com", b, at(62 * time.Minute), false, "then that board holds the period"},
			{"github.com", a, at(63 * time.Minute), true, "and the first board's next claim is granted at once too"},
			{"github.com", a, at(2 * time.Minute), true, "a claim more than a period before the last is granted: a last claim that far ahead (a clock off by more than a period, a replica gone) bounds no period"},
			{"github.com", a, at(3 * time.Minute), false, "and the claim that replaced it holds its period"},
		} {
			got, err := s.ClaimPrune(ctx, step.host, step.board, step.at, time.Hour)
			if err != nil || got != step.want {
				t.Errorf("step %d: ClaimPrune(%s, %s, %v) = %v, %v, want %v: %s", i, step.host, step.board, step.at, got, err, step.want, step.why)
			}
		}
		for _, bad := range []struct {
			host, board string
			at          time.Time
			every       time.Duration
		}{{"", a, at(0), time.Hour}, {"git/hub", a, at(0), time.Hour}, {"github.com", "", at(0), time.Hour}, {"github.com", a, time.Time{}, time.Hour}, {"github.com", a, at(0), 0}} {
			if _, err := s.ClaimPrune(ctx, bad.host, bad.board, bad.at, bad.every); !errors.Is(err, board.ErrInvalid) {
				t.Errorf("ClaimPrune(%q, %q, %v, %v) = %v, want ErrInvalid: a host, board, instant or period no claim can have is refused", bad.host, bad.board, bad.at, bad.every, err)
			}
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.ClaimPrune(done, "github.com", a, at(10*time.Hour), time.Hour); err == nil {
			t.Errorf("ClaimPrune on a done context = nil, want an error")
		}
		if got, err := s.ClaimPrune(ctx, "github.com", a, at(10*time.Hour), time.Hour); err != nil || !got {
			t.Errorf("ClaimPrune after a refused one = %v, %v, want true: a claim that failed records nothing", got, err)
		}
	}},
	{Name: "RacingClaimsOneWins", Rule: "of claims racing for one host, board and period, exactly one is granted", Check: func(t *testing.T, s board.Store) {
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range n {
			wg.Go(func() {
				got, err := s.ClaimPrune(context.Background(), "github.com", "board-a", at(time.Duration(i)*time.Millisecond), time.Hour)
				if err != nil {
					t.Errorf("ClaimPrune %d: %v", i, err)
				}
				if got {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Errorf("claims granted: %d of %d, want 1: replicas racing for a period prune once between them", won, n)
		}
	}},
	{Name: "PruneRemovesTheCardsOfOtherRepositories", Rule: "Prune deletes the cards of host whose repository is none of those given, compared without regard to case, and says how many; other hosts' cards stay", Check: func(t *testing.T, s board.Store) {
		ctx := context.Background()
		app, lib := newCard("acme/app", 1, at(0)), newCard("Acme/Lib", 2, at(0))
		old1, old2 := newCard("acme/old", 1, at(0)), newCard("acme/old", 2, at(time.Hour))
		prefix := newCard("acme/app2", 3, at(0)) // a name the kept ones are a prefix of
		ghe := newCard("acme/old", 1, at(0))
		ghe.Host = "ghe.example"
		for _, c := range []board.Card{app, lib, old1, old2, prefix, ghe} {
			put(t, s, c)
		}
		removed, err := s.Prune(ctx, "github.com", []string{"ACME/app", "acme/lib"})
		if err != nil || removed != 3 {
			t.Fatalf("Prune = %d, %v, want 3, nil: the cards of acme/old and acme/app2 on github.com", removed, err)
		}
		want := []string{app.ID(), lib.ID(), ghe.ID()}
		slices.Sort(want)
		got := ids(all(t, s, board.Query{}))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("cards after Prune: got %v, want %v: the kept repositories' cards in any case, and another host's", got, want)
		}
		if removed, err := s.Prune(ctx, "github.com", []string{"acme/app", "acme/lib"}); err != nil || removed != 0 {
			t.Errorf("Prune again = %d, %v, want 0, nil: nothing left to remove", removed, err)
		}
		for _, bad := range []struct {
			host  string
			repos []string
		}{{"", []string{"acme/app"}}, {"github.com", []string{"acme/app", "acme"}}} {
			if _, err := s.Prune(ctx, bad.host, bad.repos); !errors.Is(err, board.ErrInvalid) {
				t.Errorf("Prune(%q, %q) = %v, want ErrInvalid: a host or repository no card can have is refused", bad.host, bad.repos, err)
			}
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Prune(done, "github.com", nil); err == nil {
			t.Errorf("Prune on a done context = nil, want an error")
		}
		if got := all(t, s, board.Query{}); len(got) != 3 {
			t.Errorf("cards after refused prunes: got %v, want the 3 kept: nothing is removed", ids(got))
		}
	}},
	{Name: "CardsRefusesBadQuery", Rule: "a limit under 1 or an unknown state is ErrInvalid", Check: func(t *testing.T, s board.Store) {
		for _, q := range []board.Query{{Limit: 0}, {Limit: -1}, {Limit: 1, State: "merged"}} {
			if _, err := s.Cards(context.Background(), q); !errors.Is(err, board.ErrInvalid) {
				t.Errorf("Cards(%+v) = %v, want ErrInvalid: bad queries are refused", q, err)
			}
		}
	}},
	{Name: "SlicesNotShared", Rule: "the store keeps its own copy of a card's lists, and hands out copies", Check: func(t *testing.T, s board.Store) {
		c := newCard("acme/app", 4, at(0))
		put(t, s, c)
		c.Labels[0] = "changed-by-caller"
		got := one(t, s, c)
		if got.Labels[0] != "bug" {
			t.Fatalf("got label %q, want bug: the caller's slice is not the store's", got.Labels[0])
		}
		got.Assignees[0] = "changed-by-reader"
		if again := one(t, s, c); again.Assignees[0] != "ana" {
			t.Errorf("got assignee %q, want ana: a reader's slice is not the store's", again.Assignees[0])
		}
	}},
	{Name: "RacingPutsKeepTheNewest", Rule: "whatever the order racing puts land in, the newest read of a card is the one stored", Check: func(t *testing.T, s board.Store) {
		const n = 8
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := newCard("acme/app", 5, at(time.Duration(i)*time.Second))
				c.Title = fmt.Sprintf("version %d", i)
				if _, err := s.Put(context.Background(), c); err != nil {
					t.Errorf("Put version %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		want := fmt.Sprintf("version %d", n-1)
		if got := one(t, s, newCard("acme/app", 5, at(0))); got.Title != want {
			t.Errorf("got %q, want %q: the newest read wins a race", got.Title, want)
		}
	}},
	{Name: "DoneContext", Rule: "a call on a done context fails and writes nothing", Check: func(t *testing.T, s board.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Put(ctx, newCard("acme/app", 6, at(0))); err == nil {
			t.Errorf("Put on a done context = nil, want an error")
		}
		if got := all(t, s, board.Query{}); len(got) != 0 {
			t.Errorf("got cards %v after a Put on a done context, want none: nothing is written", ids(got))
		}
		if _, err := s.Cards(ctx, board.Query{Limit: 1}); err == nil {
			t.Errorf("Cards on a done context = nil, want an error")
		}
	}},
}
