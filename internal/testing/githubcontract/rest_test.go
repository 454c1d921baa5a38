package githubcontract_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// exchange is one request the forge client sent and the answer it got.
type exchange struct {
	method, path string
	request      []byte // the request's body
	status       int
	header       http.Header
	body         []byte
}

// recorder is the client's innermost transport: it keeps every answer.
type recorder struct {
	mu  sync.Mutex
	got []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		sent = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.got = append(r.got, exchange{req.Method, req.URL.Path, sent, resp.StatusCode, resp.Header.Clone(), body})
	r.mu.Unlock()
	return resp, nil
}

// restDescription is the vendored subset of GitHub's OpenAPI description.
type restDescription struct {
	doc   map[string]any // as JSON Schema: nullable rewritten
	paths map[string]map[string]operation
}

type operation struct {
	ID        string                     `json:"operationId"`
	Responses map[string]json.RawMessage `json:"responses"`
}

func loadDescription(t *testing.T) restDescription {
	t.Helper()
	raw, err := os.ReadFile("testdata/rest-subset.json")
	if err != nil {
		t.Fatal(err)
	}
	var d restDescription
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	d.doc = jsonSchemaOf(doc).(map[string]any)
	var shape struct {
		Paths map[string]map[string]operation `json:"paths"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		t.Fatal(err)
	}
	d.paths = shape.Paths
	return d
}

// jsonSchemaOf rewrites OpenAPI 3.0's nullable, which JSON Schema does not
// know, as JSON Schema says it: null among the types (and the enum), or an
// anyOf with null when the schema has no type of its own.
func jsonSchemaOf(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if _, flag := e.(bool); k == "nullable" && flag {
				continue
			}
			out[k] = jsonSchemaOf(e)
		}
		if t["nullable"] != true {
			return out
		}
		typ, ok := out["type"].(string)
		if !ok {
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
		}
		out["type"] = []any{typ, "null"}
		if enum, ok := out["enum"].([]any); ok {
			out["enum"] = append(enum, nil)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonSchemaOf(e)
		}
		return out
	}
	return v
}

// operationOf finds the operation a request was, by its path template.
func (d restDescription) operationOf(method, path string) (string, operation, bool) {
	for tmpl, ops := range d.paths {
		if op, ok := ops[strings.ToLower(method)]; ok && matches(tmpl, path) {
			return tmpl, op, true
		}
	}
	return "", operation{}, false
}

// matches reports whether path fills tmpl's {parameters}.
func matches(tmpl, path string) bool {
	want, got := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return false
	}
	for i, w := range want {
		if strings.HasPrefix(w, "{") {
			if got[i] == "" {
				return false
			}
		} else if w != got[i] {
			return false
		}
	}
	return true
}

// responseSchema is the JSON schema of op's answer with status, as a
// {"$ref"} into the description (following a components/responses ref),
// and the headers the answer declares.
func (d restDescription) responseSchema(op operation, status int) (schema any, headers []string, err error) {
	raw, ok := op.Responses[strconv.Itoa(status)]
	if !ok {
		return nil, nil, fmt.Errorf("%s documents no %d answer", op.ID, status)
	}
	var resp struct {
		Ref     string                          `json:"$ref"`
		Content map[string]struct{ Schema any } `json:"content"`
		Headers map[string]json.RawMessage      `json:"headers"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, nil, err
	}
	if resp.Ref != "" {
		name := strings.TrimPrefix(resp.Ref, "#/components/responses/")
		b, err := json.Marshal(d.doc["components"].(map[string]any)["responses"].(map[string]any)[name])
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(b, &resp); err != nil {
			return nil, nil, err
		}
	}
	for h := range resp.Headers {
		headers = append(headers, h)
	}
	c, ok := resp.Content["application/json"]
	if !ok {
		return nil, headers, nil
	}
	return jsonSchemaOf(c.Schema), headers, nil
}

// check validates body against schema (within the description, so its
// refs resolve) and returns the missing required fields, each once by its
// path in the answer's shape (array indexes as *), and the validation
// error, nil when the answer is valid.
func (d restDescription) check(t *testing.T, id string, schema any, body []byte) (missing []string, other error) {
	t.Helper()
	doc := maps(d.doc)
	doc["x-contract"] = map[string]any{"answer": schema}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	const url = "https://contract.invalid/rest.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: add description: %v", id, err)
	}
	sch, err := c.Compile(url + "#/x-contract/answer")
	if err != nil {
		t.Fatalf("%s: compile the answer's schema: %v", id, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if r, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range r.Missing {
				k := "/" + strings.Join(append(fieldPath(e.InstanceLocation), m), "/")
				if !seen[k] {
					seen[k] = true
					missing = append(missing, k)
				}
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(missing)
	return missing, err
}

// fieldPath is an instance location with array indexes as *: one field of
// every item.
func fieldPath(loc []string) []string {
	out := make([]string, len(loc))
	for i, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			seg = "*"
		}
		out[i] = seg
	}
	return out
}

// maps is a shallow copy of m.
func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestSimulatorAnswersMatchGitHubsDescription pins the simulator to GitHub's
// REST contract: every answer the forge client gets, called as the project
// calls it (an App installation, every page followed), validates against
// the schema GitHub's OpenAPI description gives that operation and status,
// with no required field missing, and carries GitHub's headers: the
// x-ratelimit-* budget, an ETag on a 200 GET, and every header the
// description declares for the answer (Location on a created status, Link
// on a page of issues).
func TestSimulatorAnswersMatchGitHubsDescription(t *testing.T) {
	const sha = "6dcb09b5b57875f334f61aeb33b71d7e1ac4c6f9"
	sim, srv := forgetest.StartSim(t)
	mustOK(t, sim.SeedPull("acme", "app", 12, sha, "open"))
	mustOK(t, sim.SetStatus("acme", "app", sha, forgesim.Status{Context: "ci/build", State: "success", Description: "built", TargetURL: "https://ci.example/1"}))
	mustOK(t, sim.SetStatus("acme", "app", sha, forgesim.Status{Context: "lint", State: "pending"}))
	// Past one page of 100, so the list is paginated with Link headers.
	for n := 13; n <= 113; n++ {
		mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: n, Title: "issue " + strconv.Itoa(n), State: "open", Labels: []string{"bug"}, Assignees: []string{"octocat"}}))
	}
	mustOK(t, sim.Merge("acme", "app", 12))
	rec := &recorder{}
	fc, err := forge.New(forge.Config{BaseURL: srv.URL + "/", App: &forge.AppAuth{AppID: 42, InstallationID: 7, PrivateKey: forgetest.AppKey(t)}, Next: rec, ETagCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	ctx := context.Background()
	_, err = fc.GetPull(ctx, "acme", "app", 12)
	mustOK(t, err)
	if _, err := fc.GetPull(ctx, "acme", "app", 99); !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("GetPull of a missing pull = %v, want ErrNotFound", err)
	}
	mustOK(t, fc.CreateStatus(ctx, "acme", "app", sha, forge.Status{Context: "iterion/review", State: "success", Description: "review passed", TargetURL: "https://ci.example/r/1"}))
	_, err = fc.CombinedStatus(ctx, "acme", "app", sha)
	mustOK(t, err)
	issues, err := fc.ListIssues(ctx, "acme", "app", time.Time{})
	mustOK(t, err)
	if len(issues) != 102 {
		t.Fatalf("ListIssues = %d issues, want 102 (101 and the pull request)", len(issues))
	}
	// One issue there, one transferred (301, then its new address) and one
	// deleted (410), as the board's full sync reads them.
	mustOK(t, sim.DeleteIssue("acme", "app", 13))
	_, err = sim.TransferIssue("acme", "app", 14, "acme", "lib")
	mustOK(t, err)
	if is, err := fc.GetIssue(ctx, "acme", "app", 15); err != nil || is.Number != 15 {
		t.Fatalf("GetIssue = %+v, %v, want number 15", is, err)
	}
	if is, err := fc.GetIssue(ctx, "acme", "app", 14); err != nil || is.Repo != "acme/lib" {
		t.Fatalf("GetIssue of a transferred issue = %+v, %v, want it in acme/lib", is, err)
	}
	if _, err := fc.GetIssue(ctx, "acme", "app", 13); !errors.Is(err, forge.ErrGone) {
		t.Fatalf("GetIssue of a deleted issue = %v, want ErrGone", err)
	}
	// The App client: past one page of 100 installations, so their list is
	// paginated with Link headers; installation 7, the one above, covers
	// acme/app.
	mustOK(t, sim.SeedInstallations(120, 0))
	mustOK(t, sim.AddInstallationRepos(7, "acme/app"))
	app, err := forge.NewApp(forge.AppConfig{BaseURL: srv.URL + "/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: rec, ETagCacheBytes: -1})
	mustOK(t, err)
	mustOK(t, app.Relist(ctx))
	if n := len(app.Installations()); n != 120 {
		t.Fatalf("Relist found %d installations, want 120", n)
	}
	if _, id, err := app.ForRepo(ctx, "acme", "app"); err != nil || id != 7 {
		t.Fatalf("ForRepo(acme/app) = installation %d, %v; want 7", id, err)
	}
	if _, _, err := app.ForRepo(ctx, "acme", "nosuch"); !errors.Is(err, forge.ErrNotInstalled) {
		t.Fatalf("ForRepo of a repository no installation covers = %v, want ErrNotInstalled", err)
	}
	// The checks made before a deleted or suspend webhook is applied, and
	// a removed repositories one: an installation there (200), a
	// suspended one (200, suspended_at set), one removed (404); whose
	// token GitHub then refuses to mint (403).
	mustOK(t, sim.SuspendInstallation(5))
	mustOK(t, sim.RemoveInstallation(6))
	for _, c := range []struct {
		id   int64
		gone bool
	}{{7, false}, {5, true}, {6, true}} {
		if gone, err := app.InstallationGone(ctx, c.id); err != nil || gone != c.gone {
			t.Fatalf("InstallationGone(%d) = %v, %v; want %v", c.id, gone, err, c.gone)
		}
	}
	if covered, err := app.Covers(ctx, 7, "acme/app"); err != nil || !covered {
		t.Fatalf("Covers(7, acme/app) = %v, %v; want covered", covered, err)
	}
	// A removal of more repositories than are asked about one by one is
	// checked against the list of the installation's repositories, past
	// one page of 100 (Link headers), with installation 7's token.
	more := make([]string, 100)
	for i := range more {
		more[i] = fmt.Sprintf("acme/more-%d", i)
	}
	mustOK(t, sim.AddInstallationRepos(7, more...))
	removed := []string{"acme/gone-1", "acme/more-99", "acme/gone-2", "acme/app", "acme/gone-3"}
	if still, err := app.Covered(ctx, 7, removed); err != nil || !slices.Equal(still, []string{"acme/more-99", "acme/app"}) {
		t.Fatalf("Covered(7, %v) = %v, %v; want [acme/more-99 acme/app]", removed, still, err)
	}
	if err := app.Mint(ctx, 5); !errors.Is(err, forge.ErrForbidden) {
		t.Fatalf("Mint for suspended installation 5 = %v, want ErrForbidden: GitHub refuses it 403", err)
	}

	d := loadDescription(t)
	missingBy := map[string]int{}
	seenOps := map[string]bool{}
	for _, ex := range rec.got {
		v := d.verify(t, ex)
		if v.op != "" {
			seenOps[v.op] = true
			missingBy[v.op] += v.missing
		}
		for _, p := range v.problems {
			t.Error(p)
		}
	}
	if ex, ok := find(rec.got, http.MethodPost, "/repos/acme/app/statuses/"+sha); !ok || ex.header.Get("Location") != srv.URL+"/repos/acme/app/statuses/"+sha {
		t.Errorf("created status Location = %q, want %s/repos/acme/app/statuses/%s: GitHub's", ex.header.Get("Location"), srv.URL, sha)
	}
	for _, id := range d.uncalled(seenOps) {
		t.Errorf("operation %s vendored but never called: the test does not cover it", id)
	}
	for _, id := range d.operationIDs() {
		t.Logf("%-40s required fields missing: %d", id, missingBy[id])
	}
}

// verdict is how one exchange measures against GitHub's description: the
// operation it was ("" when none), how many required fields its answer
// lacks, and each way it departs from the contract, as a line naming the
// exchange.
type verdict struct {
	op       string
	missing  int
	problems []string
}

// verify measures ex against the description: it is one of its
// operations, answered with a status the operation documents, with a body
// that validates against that answer's schema and lacks no required field,
// carrying every header the answer declares, GitHub's x-ratelimit-*
// headers, and an ETag when it is a 200 GET.
func (d restDescription) verify(t *testing.T, ex exchange) verdict {
	t.Helper()
	var v verdict
	tmpl, op, ok := d.operationOf(ex.method, ex.path)
	if !ok {
		v.problems = append(v.problems, fmt.Sprintf("%s %s: no operation of the description: the client called something not vendored", ex.method, ex.path))
		return v
	}
	v.op = op.ID
	what := fmt.Sprintf("%s %s (%s, %s) %d", ex.method, ex.path, op.ID, tmpl, ex.status)
	add := func(format string, args ...any) {
		v.problems = append(v.problems, what+": "+fmt.Sprintf(format, args...))
	}
	schema, headers, err := d.responseSchema(op, ex.status)
	if err != nil {
		add("%v", err)
		return v
	}
	if schema != nil {
		missing, err := d.check(t, op.ID, schema, ex.body)
		v.missing = len(missing)
		if len(missing) > 0 {
			add("%d required fields missing: %v", len(missing), missing)
		}
		if err != nil {
			add("answer does not validate against GitHub's schema: %v", err)
		}
	}
	for _, h := range headers {
		if ex.header.Get(h) == "" {
			add("header %s missing: GitHub's description declares it", h)
		}
	}
	for _, h := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Used", "X-Ratelimit-Reset"} {
		if _, err := strconv.ParseInt(ex.header.Get(h), 10, 64); err != nil {
			add("header %s = %q, want an integer: GitHub's rate-limit headers", h, ex.header.Get(h))
		}
	}
	if ex.header.Get("X-Ratelimit-Resource") == "" {
		add("header X-Ratelimit-Resource missing")
	}
	if ex.method == http.MethodGet && ex.status == http.StatusOK && ex.header.Get("ETag") == "" {
		add("no ETag: GitHub names every 200 GET")
	}
	return v
}

// operationIDs lists the description's operations, sorted.
func (d restDescription) operationIDs() []string {
	var ids []string
	for _, ops := range d.paths {
		for _, op := range ops {
			ids = append(ids, op.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// uncalled lists, sorted, the description's operations not in called.
func (d restDescription) uncalled(called map[string]bool) []string {
	var out []string
	for _, id := range d.operationIDs() {
		if !called[id] {
			out = append(out, id)
		}
	}
	return out
}

func find(got []exchange, method, path string) (exchange, bool) {
	for _, ex := range got {
		if ex.method == method && ex.path == path {
			return ex, true
		}
	}
	return exchange{}, false
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEverySimulatorRouteIsInGitHubsDescription pins the vendored subset
// to what the simulator serves: each of its REST endpoints
// (forgesim.APIRoutes) is an operation of the subset, so
// TestSimulatorAnswersMatchGitHubsDescription, which fails on an operation
// vendored but never called, checks every answer the simulator can give.
// POST /graphql is checked against GitHub's GraphQL schema instead.
func TestEverySimulatorRouteIsInGitHubsDescription(t *testing.T) {
	d := loadDescription(t)
	for _, route := range forgesim.APIRoutes() {
		if route == "POST /graphql" {
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		if _, _, ok := d.operationOf(method, path); !ok {
			t.Errorf("%s: the simulator serves it, but no operation of the vendored subset is it: vendor it (vendorgithub's Operations)", route)
		}
	}
}

// TestVerifySeesEveryKindOfDeparture pins that the REST check above can
// fail: each answer the simulator gave, edited to depart from GitHub's
// description in one way (a required field dropped, a field of the wrong
// type, a value outside an enum or a format, an item of an array or a
// field behind a $ref or an anyOf wrong, the body of an answer the
// operation documents by a $ref wrong, a status it does not document, a
// header missing, a path of no operation), is reported, and a nullable
// field set to null is not.
func TestVerifySeesEveryKindOfDeparture(t *testing.T) {
	const sha = "6dcb09b5b57875f334f61aeb33b71d7e1ac4c6f9"
	sim, srv := forgetest.StartSim(t)
	mustOK(t, sim.SeedPull("acme", "app", 12, sha, "open"))
	mustOK(t, sim.SeedIssue("acme", "app", forgesim.Issue{Number: 1, Title: "an issue", State: "open", Assignees: []string{"octocat"}}))
	mustOK(t, sim.AddInstallation(7, "acme", "acme/app"))
	rec := &recorder{}
	fc := forgetest.NewForge(t, srv.URL+"/", rec, "tok", nil, nil)
	t.Cleanup(fc.Close)
	ctx := context.Background()
	_, err := fc.GetIssue(ctx, "acme", "app", 1)
	mustOK(t, err)
	if _, err := fc.GetPull(ctx, "acme", "app", 99); !errors.Is(err, forge.ErrNotFound) {
		t.Fatalf("GetPull of a missing pull = %v, want ErrNotFound", err)
	}
	mustOK(t, fc.CreateStatus(ctx, "acme", "app", sha, forge.Status{Context: "ci", State: "success"}))
	app, err := forge.NewApp(forge.AppConfig{BaseURL: srv.URL + "/", AppID: 42, PrivateKey: forgetest.AppKey(t), Next: rec, ETagCacheBytes: -1})
	mustOK(t, err)
	if gone, err := app.InstallationGone(ctx, 7); err != nil || gone {
		t.Fatalf("InstallationGone(7) = %v, %v; want false", gone, err)
	}
	d := loadDescription(t)
	answer := func(method, path string) exchange {
		t.Helper()
		ex, ok := find(rec.got, method, path)
		if !ok {
			t.Fatalf("no exchange %s %s", method, path)
		}
		ex.header = ex.header.Clone()
		return ex
	}
	issue := answer(http.MethodGet, "/repos/acme/app/issues/1")
	for _, c := range []struct {
		name string
		ex   exchange
		edit func(ex *exchange, body map[string]any)
		want string // in a problem; "" for none
	}{
		{"an answer as given", issue, nil, ""},
		{"a required field dropped", issue, func(_ *exchange, b map[string]any) { delete(b, "title") }, "required fields missing: [/title]"},
		{"a field of the wrong type", issue, func(_ *exchange, b map[string]any) { b["number"] = "1" }, "does not validate"},
		{"a value outside the enum", issue, func(_ *exchange, b map[string]any) { b["state_reason"] = "forgotten" }, "does not validate"},
		{"a nullable enum null", issue, func(_ *exchange, b map[string]any) { b["state_reason"] = nil }, ""},
		{"a value outside the format", issue, func(_ *exchange, b map[string]any) { b["closed_at"] = "yesterday" }, "does not validate"},
		{"an item of an array wrong, behind a $ref", issue, func(_ *exchange, b map[string]any) {
			b["assignees"].([]any)[0].(map[string]any)["login"] = 7
		}, "does not validate"},
		{"a nullable anyOf null", answer(http.MethodGet, "/app/installations/7"), func(_ *exchange, b map[string]any) { b["account"] = nil }, ""},
		{"a nullable anyOf wrong", answer(http.MethodGet, "/app/installations/7"), func(_ *exchange, b map[string]any) { b["account"] = 7 }, "does not validate"},
		{"an answer documented by a $ref wrong", answer(http.MethodGet, "/repos/acme/app/pulls/99"), func(_ *exchange, b map[string]any) { b["message"] = 404 }, "does not validate"},
		{"a status not documented", issue, func(ex *exchange, _ map[string]any) { ex.status = http.StatusTeapot }, "documents no 418 answer"},
		{"a declared header missing", answer(http.MethodPost, "/repos/acme/app/statuses/"+sha), func(ex *exchange, _ map[string]any) { ex.header.Del("Location") }, "header Location missing"},
		{"a rate-limit header missing", issue, func(ex *exchange, _ map[string]any) { ex.header.Del("X-Ratelimit-Used") }, "header X-Ratelimit-Used"},
		{"the rate-limit resource missing", issue, func(ex *exchange, _ map[string]any) { ex.header.Del("X-Ratelimit-Resource") }, "X-Ratelimit-Resource missing"},
		{"the ETag of a 200 GET missing", issue, func(ex *exchange, _ map[string]any) { ex.header.Del("ETag") }, "no ETag"},
		{"a path of no operation", issue, func(ex *exchange, _ map[string]any) { ex.path = "/repos/acme/app/branches/1" }, "no operation of the description"},
		{"a path parameter empty", issue, func(ex *exchange, _ map[string]any) { ex.path = "/repos/acme//issues/1" }, "no operation of the description"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := c.ex
			if c.edit != nil {
				var body map[string]any
				mustOK(t, json.Unmarshal(ex.body, &body))
				c.edit(&ex, body)
				b, err := json.Marshal(body)
				mustOK(t, err)
				ex.body = b
			}
			wantReported(t, d.verify(t, ex).problems, c.want)
		})
	}
	t.Run("an operation not called", func(t *testing.T) {
		called := map[string]bool{}
		for _, id := range d.operationIDs() {
			called[id] = id != "issues/get"
		}
		if got := d.uncalled(called); !slices.Equal(got, []string{"issues/get"}) {
			t.Errorf("uncalled = %v, want [issues/get]", got)
		}
	})
}

// wantReported fails t unless one of reported says want; with want "",
// unless nothing was reported.
func wantReported(t *testing.T, reported []string, want string) {
	t.Helper()
	if want == "" {
		if len(reported) > 0 {
			t.Errorf("reported %q, want nothing: GitHub's contract allows it", reported)
		}
		return
	}
	if !slices.ContainsFunc(reported, func(r string) bool { return strings.Contains(r, want) }) {
		t.Errorf("reported %q, want one saying %q", reported, want)
	}
}
