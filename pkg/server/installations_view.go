// The installations view's answer: one row per installation of the App,
// sorted and paginated.

package server

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/gaterun"
)

// Installation listing limits: GET /api/installations answers
// DefaultInstallationsLimit installations a page unless ?limit= asks for
// another number, up to MaxInstallationsLimit; /installations shows
// DefaultInstallationsLimit a page.
const (
	DefaultInstallationsLimit = 100
	MaxInstallationsLimit     = 1000
)

// The orders GET /api/installations and /installations list installations
// in (?sort=).
const (
	// SortBudget is the lowest budget first: by the lesser of the core and
	// GraphQL budgets remaining, then installations with no figure, then
	// suspended installations (whose budget, known until its window
	// resets, is none they can spend), ties by ID. It is the default, so
	// the installation about to be held back comes first.
	SortBudget = "budget"
	// SortID is by installation ID.
	SortID = "id"
)

// Installations is the answer of GET /api/installations: one page of the
// App's installations, as the serving replica sees them at AsOf.
type Installations struct {
	// AsOf is the serving replica's now, which the page was built at.
	AsOf time.Time `json:"as_of"` // RFC 3339
	// Shards is S, the merge-gate sweeper group's shard count.
	Shards int `json:"shards"`
	// Installations is the page, in the order ?sort= asks for.
	Installations []InstallationView `json:"installations"`
	// Next is the cursor of the next page: pass it back as ?cursor= with
	// the same sort. "" on the last page.
	Next string `json:"next"`
}

// InstallationView is one installation of the App as the installations
// view shows it.
type InstallationView struct {
	// ID and Account are the installation's (Account: the login of the
	// organization or user it is on).
	ID      int64  `json:"id"`
	Account string `json:"account"`
	// Shard is the merge-gate sweeper shard that sweeps it, 0 to Shards−1.
	Shard int `json:"shard"`
	// Holder is the owner of Shard's lease in the lease store, "" when no
	// replica holds it (then nothing sweeps the installation now);
	// HeldByMe is true when it is the serving replica. Its holder sweeps
	// a suspended installation no more than an unheld one.
	Holder   string `json:"holder"`
	HeldByMe bool   `json:"held_by_me"`
	// LastPass is when its last complete sweep pass began, from the run
	// store, so every replica answers alike; null when none is recorded.
	LastPass *time.Time `json:"last_pass"` // RFC 3339
	// CoreRemaining and GraphQLRemaining are its budgets left: the fresher
	// of the serving replica's own figure and the one recorded with the
	// last pass; the whole limit once the figure's window has reset; null
	// when neither replica knows a figure.
	CoreRemaining    *int `json:"core_remaining"`
	GraphQLRemaining *int `json:"graphql_remaining"`
	// RunsOpen is how many of its runs are unsettled.
	RunsOpen int `json:"runs_open"`
	// RunsUncovered is how many of those its token could not read while
	// GitHub said no installation of the App covers their repository (so
	// no verdict of theirs is published), as recorded with its last
	// complete pass (the sweeping replica's count after the pass before);
	// 0 when none is recorded.
	RunsUncovered int `json:"runs_uncovered"`
	// Suspended is true when GitHub said the installation is suspended:
	// it serves it no token, so nothing sweeps it and its open runs wait
	// until an owner of its account unsuspends it. SuspendedAt is
	// GitHub's suspended_at, null when the answer that said so did not
	// carry it. The serving replica's App client knows this from what
	// GitHub last told it, or another replica's news said, with the
	// suspended_at that replica heard (forge.AppClient.Suspended).
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at"` // RFC 3339
}

// installationsInput is what the view's rows are built from.
type installationsInput struct {
	now  time.Time
	self string // the serving replica's owner
	// installations is the App's known set; shardOf names each one's
	// shard and holders[shard] its holder ("" unheld).
	installations []forge.Installation
	suspended     []forge.SuspendedInstallation
	shardOf       func(id int64) int
	holders       []string
	// sweeps is the run store's last sweep of each installation, local
	// the serving replica's own budget figures, open the unsettled runs
	// by installation.
	sweeps map[int64]gaterun.InstallationSweep
	local  func(id int64) []forge.RateLimit
	open   map[int64]int
}

// installationRows is a row for every installation of in, served or
// suspended, by ID.
func installationRows(in installationsInput) []InstallationView {
	rows := make([]InstallationView, 0, len(in.installations)+len(in.suspended))
	for _, inst := range in.installations {
		rows = append(rows, InstallationView{ID: inst.ID, Account: inst.Account})
	}
	for _, sus := range in.suspended {
		row := InstallationView{ID: sus.ID, Account: sus.Account, Suspended: true}
		if !sus.At.IsZero() {
			at := sus.At.UTC()
			row.SuspendedAt = &at
		}
		rows = append(rows, row)
	}
	for i, row := range rows {
		row.Shard, row.RunsOpen = in.shardOf(row.ID), in.open[row.ID]
		if row.Shard >= 0 && row.Shard < len(in.holders) {
			row.Holder = in.holders[row.Shard]
		}
		row.HeldByMe = row.Holder != "" && row.Holder == in.self
		sw, swept := in.sweeps[row.ID]
		if swept {
			at := sw.At
			row.LastPass = &at
			row.RunsUncovered = sw.Uncovered
		}
		local := in.local(row.ID)
		row.CoreRemaining = remaining("core", local, sw.Budgets, in.now)
		row.GraphQLRemaining = remaining("graphql", local, sw.Budgets, in.now)
		rows[i] = row
	}
	slices.SortFunc(rows, func(a, b InstallationView) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

// remaining is resource's budget left at now from the fresher of two sets
// of figures: the later window (Reset), and within one window the lesser
// Remaining, since a window's budget only shrinks. A window that has
// reset by now is whole again: its Limit. nil when neither set has a
// figure for resource.
func remaining(resource string, a, b []forge.RateLimit, now time.Time) *int {
	var best forge.RateLimit
	found := false
	for _, rl := range slices.Concat(a, b) {
		if rl.Resource != resource {
			continue
		}
		if !found || rl.Reset.After(best.Reset) || (rl.Reset.Equal(best.Reset) && rl.Remaining < best.Remaining) {
			best, found = rl, true
		}
	}
	if !found {
		return nil
	}
	n := best.Remaining
	if !now.Before(best.Reset) {
		n = best.Limit
	}
	return &n
}

// The budget keys of the rows with no usable budget, after every figure:
// a row with no figure, then a suspended installation's. GitHub serves a
// suspended installation no token, so the budget left in its window
// (known until that window resets) is none it can spend.
const (
	noBudgetKey        = math.MaxInt - 1
	suspendedBudgetKey = math.MaxInt
)

// budgetKey is a row's place in SortBudget: the lesser budget remaining;
// noBudgetKey when it has no figure, suspendedBudgetKey when it is
// suspended, whatever its figures.
func budgetKey(v InstallationView) int {
	if v.Suspended {
		return suspendedBudgetKey
	}
	k := noBudgetKey
	for _, n := range []*int{v.CoreRemaining, v.GraphQLRemaining} {
		if n != nil {
			k = min(k, *n)
		}
	}
	return k
}

// installationsCursor is a position in one sort's order: the key of the
// last row shown (its budget key; 0 for SortID) and its ID.
type installationsCursor struct {
	sort string
	key  int
	id   int64
}

// after reports whether v comes after c in c's order.
func (c installationsCursor) after(v InstallationView) bool {
	if c.sort == SortBudget && budgetKey(v) != c.key {
		return budgetKey(v) > c.key
	}
	return v.ID > c.id
}

// encode is c as the API's opaque cursor: base64url of "sort key id".
func (c installationsCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s %d %d", c.sort, c.key, c.id))
}

// decodeInstallationsCursor reads a cursor encode wrote for sort; an error
// wraps errInvalid and names the parameter.
func decodeInstallationsCursor(s, sort string) (installationsCursor, error) {
	bad := fmt.Errorf("%w: cursor %q is not a next value of this API for sort %q", errInvalid, clip(s), sort)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return installationsCursor{}, bad
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != sort {
		return installationsCursor{}, bad
	}
	key, err1 := strconv.Atoi(f[1])
	id, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return installationsCursor{}, bad
	}
	return installationsCursor{sort: sort, key: key, id: id}, nil
}

// installationsQuery is GET /api/installations's parameters.
type installationsQuery struct {
	sort  string
	limit int
	after *installationsCursor // nil: the first page
}

// parseInstallationsQuery reads ?sort=, ?limit= and ?cursor=; an error
// wraps errInvalid and names the bad parameter.
func parseInstallationsQuery(get func(string) string) (installationsQuery, error) {
	q := installationsQuery{sort: cmp.Or(get("sort"), SortBudget), limit: DefaultInstallationsLimit}
	if q.sort != SortBudget && q.sort != SortID {
		return q, fmt.Errorf("%w: sort %q is not %s or %s", errInvalid, clip(q.sort), SortBudget, SortID)
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxInstallationsLimit {
			return q, fmt.Errorf("%w: limit %q is not a number from 1 to %d", errInvalid, clip(l), MaxInstallationsLimit)
		}
		q.limit = n
	}
	if c := get("cursor"); c != "" {
		cur, err := decodeInstallationsCursor(c, q.sort)
		if err != nil {
			return q, err
		}
		q.after = &cur
	}
	return q, nil
}

// pageOf sorts rows as q asks and returns the page after q's cursor, and
// the cursor of the next page ("" on the last). Budgets move between two
// requests, so with SortBudget an installation whose budget crosses the
// cursor may show on two pages or on none, as any listing of a live value.
func pageOf(rows []InstallationView, q installationsQuery) ([]InstallationView, string) {
	rows = slices.Clone(rows)
	if q.sort == SortBudget {
		slices.SortStableFunc(rows, func(a, b InstallationView) int {
			return cmp.Or(cmp.Compare(budgetKey(a), budgetKey(b)), cmp.Compare(a.ID, b.ID))
		})
	}
	if q.after != nil {
		i := slices.IndexFunc(rows, q.after.after)
		if i < 0 {
			i = len(rows)
		}
		rows = rows[i:]
	}
	if len(rows) <= q.limit {
		return rows, ""
	}
	last := rows[q.limit-1]
	next := installationsCursor{sort: q.sort, id: last.ID}
	if q.sort == SortBudget {
		next.key = budgetKey(last)
	}
	return rows[:q.limit], next.encode()
}
