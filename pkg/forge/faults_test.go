package forge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge"
)

func TestMalformedAnswerIsAnErrorAndCounted(t *testing.T) {
	c := answering(t, `{"number": "twelve", "head": `)
	_, err := c.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 12)
	if err == nil {
		t.Fatal("GetPull of a malformed document: got no error, want one")
	}
	if got := countOf(c, forge.LaneWebhook, 200); got != 1 {
		t.Fatalf("counts: got %d×200, want 1: the request was sent and answered, whatever its body", got)
	}
}

func TestStalledForgeIsCountedWhenTheCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c := newClient(t, srv, forge.Config{Token: "t"})
	ctx, cancel := context.WithTimeout(laneCtx(forge.LaneMergeGateSweeper), 50*time.Millisecond)
	defer cancel()
	_, err := c.GetPull(ctx, "acme", "app", 12)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetPull on a stalled forge: got %v, want context.DeadlineExceeded", err)
	}
	if got := countOf(c, forge.LaneMergeGateSweeper, 0); got != 1 {
		t.Fatalf("counts: got %d with code 0, want 1: a request sent and never answered is counted as an error", got)
	}
}

// TestEmptyGraphQLAnswerIsAnErrorNotNotFound pins that a GraphQL 200 that
// says nothing of the pull requests asked for (neither data nor errors,
// or a null no error explains) fails the read with ErrEmptyAnswer, never
// ErrNotFound, which would push existing pull requests into back-off.
func TestEmptyGraphQLAnswerIsAnErrorNotNotFound(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"neither data nor errors", `{}`},
		{"data null, no errors", `{"data": null}`},
		{"an alias null, no errors", `{"data": {"p0": null, "rateLimit": {"cost": 1}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := answering(t, c.body)
			states, err := fc.PullStates(laneCtx(forge.LaneMergeGateSweeper), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 12}})
			if err == nil && len(states) == 1 {
				err = states[0].Err
			}
			if !errors.Is(err, forge.ErrEmptyAnswer) || errors.Is(err, forge.ErrNotFound) {
				t.Errorf("PullStates on %s: got %v, want ErrEmptyAnswer and not ErrNotFound: an empty answer is a failed read", c.body, err)
			}
		})
	}
}

// TestGraphQLAnswerWithoutDataOrErrorsFailsTheWholeCall pins that an
// answer whose data is absent or null with no errors fails PullStates as
// a whole with ErrEmptyAnswer: it says nothing of any pull request of the
// batch, so none gets a state of its own.
func TestGraphQLAnswerWithoutDataOrErrorsFailsTheWholeCall(t *testing.T) {
	for _, body := range []string{`{}`, `{"data": null}`} {
		refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 12}, {Owner: "acme", Repo: "app", Number: 13}}
		states, err := answering(t, body).PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
		if !errors.Is(err, forge.ErrEmptyAnswer) || states != nil {
			t.Errorf("PullStates on %s: got %v and %d states, want the call to fail with ErrEmptyAnswer and no states", body, err, len(states))
		}
	}
}

// TestGetPullRefusesAnAnswerMissingWhatGitHubRequires pins that a REST
// pull request answer, valid JSON, that lacks what GitHub's schema
// requires (number, state, head.sha) or holds another state or number
// fails with ErrMalformedAnswer naming the field, never a Pull: read as
// one, it would be a closed pull request or a moved head, and the merge
// gate would settle a run it can no longer repair.
func TestGetPullRefusesAnAnswerMissingWhatGitHubRequires(t *testing.T) {
	for _, c := range []struct{ name, body, field string }{
		{"an empty object", `{}`, "number"},
		{"no state", `{"number": 12, "head": {"sha": "abc"}}`, "state"},
		{"a state GitHub does not have", `{"number": 12, "state": "draft", "head": {"sha": "abc"}}`, "state"},
		{"no head sha", `{"number": 12, "state": "open", "head": {}}`, "sha"},
		{"no head", `{"number": 12, "state": "open"}`, "sha"},
		{"another pull request", `{"number": 13, "state": "open", "head": {"sha": "abc"}}`, "number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := answering(t, c.body)
			p, err := fc.GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 12)
			if !errors.Is(err, forge.ErrMalformedAnswer) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("GetPull on %s: got %+v, %v; want ErrMalformedAnswer naming %s", c.body, p, err, c.field)
			}
		})
	}
	if p, err := answering(t, `{"number": 12, "state": "closed", "merged": true, "head": {"sha": "abc"}}`).GetPull(laneCtx(forge.LaneWebhook), "acme", "app", 12); err != nil || p != (forge.Pull{Number: 12, State: "closed", Merged: true, HeadSHA: "abc"}) {
		t.Errorf("GetPull on a whole answer: got %+v, %v; want #12 closed, merged, at abc", p, err)
	}
}

// TestCombinedStatusRefusesAStatusMissingWhatGitHubRequires pins that a
// status without its context or state, or with a state GitHub's statuses
// do not have, fails CombinedStatus with ErrMalformedAnswer naming it:
// read as a status that is not the verdict, it would have the gate publish
// the verdict again on every offer, up to GitHub's 1,000 a context.
func TestCombinedStatusRefusesAStatusMissingWhatGitHubRequires(t *testing.T) {
	for _, c := range []struct{ name, body, field string }{
		{"no state", `{"state": "pending", "statuses": [{"context": "iterion/review"}]}`, "iterion/review: state"},
		{"a state statuses do not have", `{"state": "pending", "statuses": [{"context": "iterion/review", "state": "green"}]}`, "iterion/review: state"},
		{"no context", `{"state": "success", "statuses": [{"state": "success"}]}`, "context"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs, err := answering(t, c.body).CombinedStatus(laneCtx(forge.LaneWebhook), "acme", "app", "abc")
			if !errors.Is(err, forge.ErrMalformedAnswer) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("CombinedStatus on %s: got %+v, %v; want ErrMalformedAnswer naming %s", c.body, cs, err, c.field)
			}
		})
	}
	cs, err := answering(t, `{"state": "success", "statuses": [{"context": "iterion/review", "state": "success"}]}`).CombinedStatus(laneCtx(forge.LaneWebhook), "acme", "app", "abc")
	if err != nil || len(cs.Statuses) != 1 || cs.Statuses[0].State != "success" {
		t.Errorf("CombinedStatus on a whole answer: got %+v, %v; want one success", cs, err)
	}
}

// TestPullStatesRefusesAPullMissingWhatGitHubRequires pins the same for a
// batch: a pull request whose answer lacks its head commit's oid or its
// state, has a state GraphQL's PullRequestState does not, is another pull
// request than the one asked for, or has a status without its state gets
// an Err wrapping ErrMalformedAnswer (not ErrNotFound), and the batch's
// whole answers stand.
func TestPullStatesRefusesAPullMissingWhatGitHubRequires(t *testing.T) {
	pull := func(fields string) string {
		return `{"pullRequest": {` + fields + `, "commits": {"nodes": []}}}`
	}
	body := `{"data": {` +
		`"p0": ` + pull(`"number": 1, "state": "OPEN", "headRefOid": "a1"`) + `, ` +
		`"p1": ` + pull(`"number": 2, "state": "OPEN", "headRefOid": null`) + `, ` +
		`"p2": ` + pull(`"number": 3, "headRefOid": "a3"`) + `, ` +
		`"p3": ` + pull(`"number": 4, "state": "DRAFT", "headRefOid": "a4"`) + `, ` +
		`"p4": ` + pull(`"number": 6, "state": "OPEN", "headRefOid": "a5"`) + `, ` +
		`"p5": ` + pull(`"number": 6, "state": "MERGED", "merged": true, "headRefOid": "a6"`) + `, ` +
		`"p6": {"pullRequest": {"number": 7, "state": "OPEN", "headRefOid": "a7", "commits": {"nodes": [{"commit": {"oid": "a7", "status": {"contexts": [{"context": "iterion/review", "state": null}]}}}]}}}, ` +
		`"rateLimit": {"cost": 1}}}`
	fc := answering(t, body)
	var refs []forge.PullRef
	for n := 1; n <= 7; n++ {
		refs = append(refs, forge.PullRef{Owner: "acme", Repo: "app", Number: n})
	}
	states, err := fc.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
	if err != nil || len(states) != len(refs) {
		t.Fatalf("PullStates: got %d states, %v; want %d and no error: one pull request's answer fails alone", len(states), err, len(refs))
	}
	want := map[int]string{1: "", 2: "sha", 3: "state", 4: "state", 5: "number", 6: "", 7: "iterion/review: state"}
	for i, st := range states {
		n := refs[i].Number
		if want[n] == "" {
			if st.Err != nil || st.Pull.Number != n || st.Pull.HeadSHA != fmt.Sprintf("a%d", n) {
				t.Errorf("#%d: got %+v, want it read whole", n, st)
			}
			continue
		}
		if !errors.Is(st.Err, forge.ErrMalformedAnswer) || errors.Is(st.Err, forge.ErrNotFound) || !strings.Contains(st.Err.Error(), want[n]) || st.Pull != (forge.Pull{}) {
			t.Errorf("#%d: got %+v; want no pull request and an Err wrapping ErrMalformedAnswer, not ErrNotFound, naming %s", n, st, want[n])
		}
	}
	if states[5].Pull.State != "closed" || !states[5].Pull.Merged {
		t.Errorf("#6 MERGED: got %+v, want closed and merged", states[5].Pull)
	}
}

// FuzzPullStatesAnswer pins what a batch read promises whatever GitHub's
// 200 holds: no panic, and either an error or one PullState per ref, each
// failed alone (Err, with no statuses) or a whole pull request: the
// number asked for, open or closed, with a head commit, and statuses each
// with a context and one of GitHub's states. A run is never decided from
// less.
func FuzzPullStatesAnswer(f *testing.F) {
	for _, body := range []string{
		`{"data": {"p0": {"pullRequest": {"number": 1, "state": "OPEN", "merged": false, "headRefOid": "a", "commits": {"nodes": [{"commit": {"oid": "a", "status": {"contexts": [{"context": "iterion/review", "state": "SUCCESS"}]}}}]}}}, "p1": {"pullRequest": {"number": 2, "state": "MERGED", "merged": true, "headRefOid": "b", "commits": {"nodes": []}}}, "rateLimit": {"cost": 1}}}`,
		`{"data": {"p0": null, "p1": {"pullRequest": null}}, "errors": [{"type": "NOT_FOUND", "path": ["p0"], "message": "x"}]}`,
		`{"data": {"p0": {"pullRequest": {"number": 1, "headRefOid": null}}}}`,
		`{"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded"}]}`,
		`{"data": {"p1": {"pullRequest": {"number": 2, "state": "CLOSED", "headRefOid": "b", "commits": {"nodes": [{"commit": {"oid": "c"}}]}}}}}`,
		`{}`, `null`, `[]`, `{"data": 1}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		defer srv.Close()
		fc := newClient(t, srv, forge.Config{Token: "t"})
		refs := []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}, {Owner: "acme", Repo: "app", Number: 2}}
		states, err := fc.PullStates(laneCtx(forge.LaneMergeGateSweeper), refs)
		if err != nil {
			return
		}
		if len(states) != len(refs) {
			t.Fatalf("got %d states and no error, want %d", len(states), len(refs))
		}
		for i, st := range states {
			if st.Err != nil {
				if st.Statuses != nil {
					t.Errorf("#%d: Err %v beside statuses %v; want none taken from a failed read", refs[i].Number, st.Err, st.Statuses)
				}
				continue
			}
			if p := st.Pull; p.Number != refs[i].Number || (p.State != "open" && p.State != "closed") || p.HeadSHA == "" {
				t.Errorf("#%d: got %+v without an Err; want the pull request asked for, open or closed, with its head", refs[i].Number, p)
			}
			for _, s := range st.Statuses {
				if s.Context == "" || !slices.Contains([]string{"error", "expected", "failure", "pending", "success"}, s.State) {
					t.Errorf("#%d: status %+v without an Err; want a context and one of GitHub's states", refs[i].Number, s)
				}
			}
		}
	})
}
