package forgesim_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"iterion.dev/iterion/pkg/forge/forgesim"
)

func TestListInstallationsIsPaginatedWithLinkAndNeedsTheAppsJWT(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(5, 1))
	app := jwt("42")
	if resp, _ := do(t, srv, "GET", "/app/installations", "ghp_user", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /app/installations with a plain token: %d, want 401: the endpoint takes an App JWT only", resp.StatusCode)
	}
	var ids []int64
	path := "/app/installations?per_page=2"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 installations")
		}
		resp, body := do(t, srv, "GET", path, app, "")
		var page []struct {
			ID      int64 `json:"id"`
			Account struct {
				Login string `json:"login"`
			} `json:"account"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		for _, in := range page {
			if want := "org-" + strconv.FormatInt(in.ID, 10); in.Account.Login != want {
				t.Errorf("installation %d on %q, want %q", in.ID, in.Account.Login, want)
			}
			ids = append(ids, in.ID)
		}
		path = nextLink(resp.Header.Get("Link"), srv.URL)
	}
	if want := []int64{1, 2, 3, 4, 5}; !slices.Equal(ids, want) {
		t.Fatalf("listed %v, want %v: every installation once, in order, across the pages the Link header names", ids, want)
	}
}

func TestRepoInstallationFindsTheCoveringInstallationWithoutCase(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(3, 2))
	app := jwt("42")
	cases := []struct {
		path string
		want int
		id   int64
		rule string
	}{
		{"/repos/org-2/repo-1/installation", 200, 2, "org-<i>/repo-<j> belongs to installation i"},
		{"/repos/ORG-3/Repo-2/installation", 200, 3, "names compare without regard to case"},
		{"/repos/org-2/repo-3/installation", 404, 0, "a repository no installation covers is 404"},
	}
	for _, tc := range cases {
		resp, body := do(t, srv, "GET", tc.path, app, "")
		var got struct {
			ID int64 `json:"id"`
		}
		_ = json.Unmarshal(body, &got)
		if resp.StatusCode != tc.want || got.ID != tc.id {
			t.Errorf("GET %s: %d id %d, want %d id %d: %s", tc.path, resp.StatusCode, got.ID, tc.want, tc.id, tc.rule)
		}
	}
	if resp, _ := do(t, srv, "GET", "/repos/org-2/repo-1/installation", "ghp_user", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /repos/org-2/repo-1/installation with a user's token: %d, want 401: the endpoint takes an App JWT only", resp.StatusCode)
	}
}

// TestARemovedInstallationCoversNoneOfItsRepositories pins
// RemoveInstallation's "whose repositories no installation covers": each
// answers 404 to GET /repos/{owner}/{repo}/installation, and an
// installation added again under the same ID covers only the
// repositories it is added with.
func TestARemovedInstallationCoversNoneOfItsRepositories(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.AddInstallation(1, "acme", "acme/app", "acme/lib"))
	mustOK(t, sim.RemoveInstallation(1))
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/installation", jwt("42"), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /repos/acme/app/installation after its installation's removal: %d, want 404", resp.StatusCode)
	}
	mustOK(t, sim.AddInstallation(1, "acme", "acme/lib"))
	for path, want := range map[string]int{"/repos/acme/app/installation": http.StatusNotFound, "/repos/acme/lib/installation": http.StatusOK} {
		if resp, _ := do(t, srv, "GET", path, jwt("42"), ""); resp.StatusCode != want {
			t.Errorf("GET %s with installation 1 added again covering acme/lib alone: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// mintFor asks for an installation token of id with the App's JWT.
func mintFor(t *testing.T, srv *httptest.Server, id string) (int, string) {
	t.Helper()
	resp, body := do(t, srv, "POST", "/app/installations/"+id+"/access_tokens", jwt("42"), "")
	var tok struct {
		Token string `json:"token"`
	}
	_ = json.Unmarshal(body, &tok)
	return resp.StatusCode, tok.Token
}

func TestEachInstallationSpendsItsOwnBudget(t *testing.T) {
	sim, srv := start(t, forgesim.WithBudget(3))
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	_, tok2 := mintFor(t, srv, "2")
	for range 3 {
		if resp, _ := do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, ""); resp.StatusCode != 200 {
			t.Fatalf("installation 1 within its budget: %d", resp.StatusCode)
		}
	}
	if resp, _ := do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("installation 1 past its budget of 3: %d, want 403", resp.StatusCode)
	}
	resp, _ := do(t, srv, "GET", "/repos/org-2/repo-1/issues", tok2, "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "2" {
		t.Fatalf("installation 2 after installation 1 spent its budget: %d, remaining %s; want 200 and 2: budgets are per installation",
			resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"))
	}
}

func TestEachInstallationMeetsItsOwnSecondaryLimits(t *testing.T) {
	sim, srv := start(t, forgesim.WithSecondaryLimits(forgesim.SecondaryLimits{RESTPointsPerMinute: 2}))
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	_, tok2 := mintFor(t, srv, "2")
	for range 2 {
		do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, "")
	}
	if resp, _ := do(t, srv, "GET", "/repos/org-1/repo-1/issues", tok1, ""); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("installation 1's third read of the route in a minute of 2 points: %d, want 403 with retry-after", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "GET", "/repos/org-2/repo-1/issues", tok2, ""); resp.StatusCode != 200 {
		t.Fatalf("installation 2 while installation 1 is over its per-minute limit: %d, want 200: secondary limits are per installation", resp.StatusCode)
	}
}

func TestAnInstallationTokenReachesOnlyItsRepositories(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(2, 1))
	_, tok1 := mintFor(t, srv, "1")
	cases := []struct {
		path string
		want int
		rule string
	}{
		{"/repos/org-1/repo-1/issues", 200, "its own repository"},
		{"/repos/ORG-1/REPO-1/issues", 200, "its own repository, in another case"},
		{"/repos/org-2/repo-1/issues", 404, "another installation's repository is not found, as GitHub hides what a token cannot see"},
	}
	for _, tc := range cases {
		if resp, _ := do(t, srv, "GET", tc.path, tok1, ""); resp.StatusCode != tc.want {
			t.Errorf("installation 1 GET %s: %d, want %d: %s", tc.path, resp.StatusCode, tc.want, tc.rule)
		}
	}
	if resp, _ := do(t, srv, "GET", "/repos/org-2/repo-1/issues", "ghp_user", ""); resp.StatusCode != 200 {
		t.Errorf("a plain token on org-2/repo-1: %d, want 200: only installation tokens are scoped", resp.StatusCode)
	}
	// GraphQL alike: another installation's repository does not resolve.
	const q = `{ own: repository(owner: "org-1", name: "repo-1") { name } other: repository(owner: "org-2", name: "repo-1") { name } }`
	for _, tc := range []struct {
		tok       string
		wantOther bool
	}{{tok1, false}, {"ghp_user", true}} {
		_, body := do(t, srv, "POST", "/graphql", tc.tok, gqlBody(q))
		var a gqlAnswer
		mustOK(t, json.Unmarshal(body, &a))
		if string(a.Data["own"]) == "null" || a.Data["own"] == nil {
			t.Errorf("%s: its own repository over GraphQL: %s, want it resolved", tc.tok, body)
		}
		gotOther := a.Data["other"] != nil && string(a.Data["other"]) != "null"
		notFound := len(a.Errors) == 1 && a.Errors[0].Type == "NOT_FOUND" && strings.Contains(a.Errors[0].Message, "Could not resolve to a Repository")
		if gotOther != tc.wantOther || (!tc.wantOther && !notFound) {
			t.Errorf("%s: org-2/repo-1 over GraphQL: %s; want resolved %v (an installation token gets NOT_FOUND for a repository its installation does not cover, as over REST)", tc.tok, body, tc.wantOther)
		}
	}
}

func TestTokensAreMintedOnlyForInstallationsTheAppHas(t *testing.T) {
	sim, srv := start(t)
	if code, _ := mintFor(t, srv, "77"); code != http.StatusCreated {
		t.Fatalf("before any installation is added: %d, want 201: every ID is trusted, as before", code)
	}
	mustOK(t, sim.AddInstallation(1, "acme", "acme/app"))
	if code, _ := mintFor(t, srv, "77"); code != http.StatusNotFound {
		t.Fatalf("an ID the App does not have, once installations are added: %d, want 404", code)
	}
	code, tok := mintFor(t, srv, "1")
	if code != http.StatusCreated {
		t.Fatalf("installation 1: %d, want 201", code)
	}
	mustOK(t, sim.RemoveInstallation(1))
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/issues", tok, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a token of a removed installation: %d, want 401 Bad credentials", resp.StatusCode)
	}
	if code, _ := mintFor(t, srv, "1"); code != http.StatusNotFound {
		t.Fatalf("minting for a removed installation: %d, want 404", code)
	}
	mustOK(t, sim.AddInstallation(1, "acme", "acme/app"))
	code, tok = mintFor(t, srv, "1")
	if resp, _ := do(t, srv, "GET", "/repos/acme/app/issues", tok, ""); code != http.StatusCreated || resp.StatusCode != http.StatusOK {
		t.Fatalf("installation 1 added again: mint %d, a read with its token %d; want 201 and 200: its new tokens work", code, resp.StatusCode)
	}
}

// TestATokenOfNoInstallationListsNoRepositories pins GET
// /installation/repositories for a token minted before any installation
// was added (every ID trusted): it has no installation to list, and is
// answered 403 as any token that is not an installation's.
func TestATokenOfNoInstallationListsNoRepositories(t *testing.T) {
	sim, srv := start(t)
	_, tok := mintFor(t, srv, "77")
	mustOK(t, sim.AddInstallation(1, "acme", "acme/app"))
	if resp, _ := do(t, srv, "GET", "/installation/repositories", tok, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /installation/repositories with a token of installation 77, never added: %d, want 403", resp.StatusCode)
	}
}

// hookSink records the webhooks it receives.
type hookSink struct {
	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	event, signature string
	body             []byte
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.got = append(h.got, delivery{r.Header.Get("X-GitHub-Event"), r.Header.Get("X-Hub-Signature-256"), b})
	h.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func TestInstallationChangesSendSignedWebhooks(t *testing.T) {
	sink := &hookSink{}
	hooks := httptest.NewServer(sink)
	t.Cleanup(hooks.Close)
	sim, srv := start(t)
	const secret = "s3cret"
	ctl := func(method, path, body string) {
		t.Helper()
		if resp, b := do(t, srv, method, path, "", body); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
	}
	ctl("POST", "/_sim/webhook", `{"url":"`+hooks.URL+`","secret":"`+secret+`","app_id":42}`)
	ctl("POST", "/_sim/installations", `{"id":7,"account":"acme","repositories":["acme/app"]}`)
	ctl("POST", "/_sim/installations/7/repos", `{"add":["acme/web"]}`)
	ctl("POST", "/_sim/installations/7/repos", `{"remove":["ACME/app"]}`)
	ctl("DELETE", "/_sim/installations/7", "")
	want := []struct {
		event, action, repos string
	}{
		{"installation", "created", "repositories=acme/app"},
		{"installation_repositories", "added", "repositories_added=acme/web"},
		{"installation_repositories", "removed", "repositories_removed=acme/app"},
		{"installation", "deleted", "repositories=acme/web"},
	}
	if len(sink.got) != len(want) {
		t.Fatalf("got %d webhooks, want %d: one per change, delivered before the control call answers", len(sink.got), len(want))
	}
	for i, w := range want {
		d := sink.got[i]
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(d.body)
		if d.signature != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			t.Errorf("webhook %d: X-Hub-Signature-256 %q does not sign its body with the secret", i, d.signature)
		}
		var p map[string]json.RawMessage
		mustOK(t, json.Unmarshal(d.body, &p))
		var action string
		var inst struct {
			ID    int64 `json:"id"`
			AppID int64 `json:"app_id"`
		}
		_ = json.Unmarshal(p["action"], &action)
		_ = json.Unmarshal(p["installation"], &inst)
		field, repo, _ := strings.Cut(w.repos, "=")
		var repos []struct {
			FullName string `json:"full_name"`
		}
		_ = json.Unmarshal(p[field], &repos)
		if d.event != w.event || action != w.action || inst.ID != 7 || inst.AppID != 42 || len(repos) != 1 || repos[0].FullName != repo {
			t.Errorf("webhook %d: %s %s installation %d app %d %s=%v; want %s %s installation 7 app 42 %s",
				i, d.event, action, inst.ID, inst.AppID, field, repos, w.event, w.action, w.repos)
		}
	}
	if sent, failed := sim.Deliveries(); sent != 4 || failed != 0 {
		t.Fatalf("Deliveries = %d sent, %d failed; want 4, 0", sent, failed)
	}
}

func TestInstallationControlBodiesNameTheBadField(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.AddInstallation(1, "acme"))
	cases := []struct {
		method, path, body, field string
	}{
		{"POST", "/_sim/installations", `{"id":0,"account":"a"}`, "id"},
		{"POST", "/_sim/installations", `{"id":2}`, "account"},
		{"POST", "/_sim/installations", `{"id":1,"account":"acme"}`, "id"},
		{"POST", "/_sim/installations", `{"id":2,"account":"a","repositories":["nope"]}`, "repositories"},
		{"POST", "/_sim/installations", `{"installations":-1}`, "installations"},
		{"POST", "/_sim/installations/x/repos", `{"add":["a/b"]}`, "id"},
		{"POST", "/_sim/installations/1/repos", `{}`, "add"},
		{"POST", "/_sim/webhook", `{"url":"ftp://x"}`, "url"},
	}
	for _, tc := range cases {
		resp, body := do(t, srv, tc.method, tc.path, "", tc.body)
		var e struct {
			Field string `json:"field"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Field != tc.field {
			t.Errorf("%s %s %s: %d field %q, want 400 naming %q", tc.method, tc.path, tc.body, resp.StatusCode, e.Field, tc.field)
		}
	}
	if resp, _ := do(t, srv, "DELETE", "/_sim/installations/9", "", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("removing an unknown installation: %d, want 404", resp.StatusCode)
	}
}

func TestSeedInstallationsThroughTheControlAPI(t *testing.T) {
	sim, srv := start(t)
	if resp, b := do(t, srv, "POST", "/_sim/installations", "", `{"installations":3,"repos_per_installation":2}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("seed: %d %s", resp.StatusCode, b)
	}
	got := sim.Installations()
	if len(got) != 3 || got[2].ID != 3 || got[2].Account != "org-3" || !slices.Equal(got[2].Repositories, []string{"org-3/repo-1", "org-3/repo-2"}) {
		t.Fatalf("Installations() = %+v, want 1..3 each on org-<i> owning org-<i>/repo-1 and repo-2", got)
	}
}

// nextLink is the path and query of a Link header's rel="next", "" when
// there is none.
func nextLink(link, root string) string {
	for _, part := range strings.Split(link, ",") {
		if strings.Contains(part, `rel="next"`) {
			u := strings.TrimSpace(part[:strings.Index(part, ";")])
			return strings.TrimPrefix(strings.Trim(u, "<>"), root)
		}
	}
	return ""
}

func TestGetInstallationAnswersOnlyTheAppsInstallations(t *testing.T) {
	sim, srv := start(t)
	mustOK(t, sim.SeedInstallations(3, 1))
	mustOK(t, sim.RemoveInstallation(3))
	cases := []struct {
		path, tok string
		want      int
		id        int64
		rule      string
	}{
		{"/app/installations/2", jwt("42"), 200, 2, "an installation of the App is answered"},
		{"/app/installations/3", jwt("42"), 404, 0, "a removed installation is 404"},
		{"/app/installations/9", jwt("42"), 404, 0, "an id never added is 404"},
		{"/app/installations/2", "ghp_user", 401, 0, "the endpoint takes an App JWT only"},
	}
	for _, tc := range cases {
		resp, body := do(t, srv, "GET", tc.path, tc.tok, "")
		var got struct {
			ID          int64   `json:"id"`
			SuspendedAt *string `json:"suspended_at"`
		}
		_ = json.Unmarshal(body, &got)
		if resp.StatusCode != tc.want || got.ID != tc.id || got.SuspendedAt != nil {
			t.Errorf("GET %s: %d id %d suspended_at %v, want %d id %d, not suspended: %s", tc.path, resp.StatusCode, got.ID, got.SuspendedAt, tc.want, tc.id, tc.rule)
		}
	}
}

// TestJWTTimesAreCheckedOnTheSimulatorsClock pins WithJWTTimes: an App
// JWT is refused 401, with GitHub's message naming the claim, when its iat
// is after the simulator's clock, its exp is not after it or is more than
// 10 minutes after it; one within those bounds is served.
func TestJWTTimesAreCheckedOnTheSimulatorsClock(t *testing.T) {
	sim, srv := start(t, forgesim.WithJWTTimes())
	mustOK(t, sim.SeedInstallations(1, 1))
	enc := base64.RawURLEncoding.EncodeToString
	at := func(iat, exp time.Duration) string {
		claims := fmt.Sprintf(`{"iss":"42","iat":%d,"exp":%d}`, t0.Add(iat).Unix(), t0.Add(exp).Unix())
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".sig"
	}
	for _, tc := range []struct {
		name  string
		jwt   string
		claim string // "" : served
	}{
		{"backdated a minute, expiring in five", at(-time.Minute, 5*time.Minute), ""},
		{"issued now, expiring in ten minutes", at(0, 10*time.Minute), ""},
		{"issued a second ahead of the clock", at(time.Second, 5*time.Minute), "'iat'"},
		{"expired", at(-3*time.Minute, 0), "'exp'"},
		{"expiring over ten minutes ahead", at(-time.Minute, 10*time.Minute+time.Second), "'exp'"},
		{"without times", jwt("42"), "'iat'"},
	} {
		resp, body := do(t, srv, "GET", "/app/installations", "", "", "Authorization", "Bearer "+tc.jwt)
		switch {
		case tc.claim == "" && resp.StatusCode != http.StatusOK:
			t.Errorf("%s: got %d %s, want 200: GitHub takes its times", tc.name, resp.StatusCode, body)
		case tc.claim != "" && (resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), tc.claim)):
			t.Errorf("%s: got %d %s, want 401 naming the claim %s", tc.name, resp.StatusCode, body, tc.claim)
		}
	}
}
