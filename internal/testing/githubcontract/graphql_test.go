package githubcontract_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"iterion.dev/iterion/internal/testing/forgetest"
	"iterion.dev/iterion/pkg/forge"
	"iterion.dev/iterion/pkg/forge/forgesim"
)

// githubSchema is GitHub's public GraphQL schema, as vendored
// (loadGitHubSchema).
func githubSchema(t *testing.T) *ast.Schema {
	t.Helper()
	sdl, err := os.ReadFile("testdata/schema.graphql")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := loadGitHubSchema(string(sdl))
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

// loadGitHubSchema loads sdl, GitHub's schema. The published schema
// (@octokit/graphql-schema 15.26.1) defines two fields of
// EnterpriseOwnerInfo twice, identically (repositoryDeployKeySetting and
// repositoryDeployKeySettingOrganizations), which GraphQL's rules and so
// gqlparser refuse; the later copy of a field defined twice with one type is
// dropped, and one defined twice with two types is an error.
func loadGitHubSchema(sdl string) (*ast.Schema, error) {
	doc, err := parser.ParseSchemas(validator.Prelude, &ast.Source{Name: "github schema.graphql", Input: sdl})
	if err != nil {
		return nil, fmt.Errorf("GitHub's schema does not parse: %w", err)
	}
	for _, def := range doc.Definitions {
		seen := map[string]*ast.FieldDefinition{}
		kept := def.Fields[:0]
		for _, f := range def.Fields {
			first, twice := seen[f.Name]
			switch {
			case !twice:
				seen[f.Name] = f
				kept = append(kept, f)
			case first.Type.String() != f.Type.String():
				return nil, fmt.Errorf("GitHub's schema defines %s.%s twice, as %s and as %s", def.Name, f.Name, first.Type, f.Type)
			}
		}
		def.Fields = kept
	}
	schema, err := validator.ValidateSchemaDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("GitHub's schema does not load: %w", err)
	}
	return schema, nil
}

// TestLoadGitHubSchemaDropsOnlyIdenticalRepeats pins the one liberty taken
// with GitHub's schema: a field defined twice with one type loads, once;
// one defined twice with two types is refused.
func TestLoadGitHubSchemaDropsOnlyIdenticalRepeats(t *testing.T) {
	s, err := loadGitHubSchema("type Query { a: Int\n a: Int\n b: String }")
	if err != nil {
		t.Fatalf("a field repeated with one type: %v, want it loaded", err)
	}
	n := 0
	for _, f := range s.Query.Fields {
		if f.Name == "a" {
			n++
		}
	}
	if n != 1 || s.Query.Fields.ForName("b") == nil {
		t.Errorf("Query has a %d times and b %v, want a once and b: only the repeat is dropped", n, s.Query.Fields.ForName("b") != nil)
	}
	if _, err := loadGitHubSchema("type Query { a: Int\n a: String }"); err == nil || !strings.Contains(err.Error(), "Query.a twice, as Int and as String") {
		t.Errorf("a field repeated with two types: %v, want it refused naming both", err)
	}
}

// TestSweeperQueryIsValidAgainstGitHubsSchema pins that the query the forge
// client sends for PullStates (built by githubv4 from Go structs), taken as
// the simulator received it, is valid against GitHub's public schema: every
// field, argument, variable and type it names is GitHub's; and that the
// simulator's answer to it is one GitHub's schema allows (answerDiffs), for
// a commit with statuses and one without.
func TestSweeperQueryIsValidAgainstGitHubsSchema(t *testing.T) {
	sim, srv := forgetest.StartSim(t)
	mustOK(t, sim.SeedPull("acme", "app", 1, "aaa", "open"))
	mustOK(t, sim.SeedPull("acme", "lib", 2, "bbb", "open"))
	mustOK(t, sim.SetStatus("acme", "app", "aaa", forgesim.Status{Context: "ci/build", State: "success", Description: "built"}))
	mustOK(t, sim.SetStatus("acme", "app", "aaa", forgesim.Status{Context: "lint", State: "pending"}))
	rec := &recorder{}
	fc := forgetest.NewForge(t, srv.URL+"/", rec, "tok", nil, nil)
	t.Cleanup(fc.Close)
	states, err := fc.PullStates(context.Background(), []forge.PullRef{{Owner: "acme", Repo: "app", Number: 1}, {Owner: "acme", Repo: "lib", Number: 2}})
	mustOK(t, err)
	if len(states) != 2 || states[0].Pull.HeadSHA != "aaa" || states[1].Pull.HeadSHA != "bbb" {
		t.Fatalf("PullStates = %+v, want heads aaa and bbb", states)
	}
	schema := githubSchema(t)
	queries := 0
	for _, ex := range rec.got {
		if ex.path != "/graphql" {
			continue
		}
		var req struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		if err := json.Unmarshal(ex.request, &req); err != nil {
			t.Fatalf("GraphQL request body: %v", err)
		}
		queries++
		doc, errs := gqlparser.LoadQueryWithRules(schema, req.Query, nil)
		if len(errs) > 0 {
			t.Errorf("the sweeper's query is not valid against GitHub's schema: %v\nquery: %s", errs, req.Query)
			continue
		}
		t.Logf("query valid against GitHub's schema (%d bytes, %d variables): %.300s", len(req.Query), len(req.Variables), req.Query)
		for _, d := range answerDiffs(schema, doc, ex.body) {
			t.Errorf("the simulator's answer: %s\nanswer: %s", d, ex.body)
		}
	}
	if queries == 0 {
		t.Fatal("the client sent no GraphQL query: nothing was checked")
	}
}

// answerDiffs lists how answer, a GraphQL response to doc's one operation,
// departs from what GitHub's schema gh allows: errors present, or data
// without a field the query selects, a non-null field null, a list not a
// list, an enum value not in the enum, a built-in scalar of another JSON
// type, a custom scalar (GitObjectID, DateTime, URI) not a string, as
// GitHub serialises them. Each difference names its path in the answer. A
// query with fragments is reported, not read.
func answerDiffs(gh *ast.Schema, doc *ast.QueryDocument, answer []byte) []string {
	var resp struct {
		Data   map[string]any    `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(answer, &resp); err != nil {
		return []string{fmt.Sprintf("not a GraphQL response: %v", err)}
	}
	var diffs []string
	for _, e := range resp.Errors {
		diffs = append(diffs, fmt.Sprintf("error %s", e))
	}
	if len(doc.Operations) != 1 {
		return append(diffs, fmt.Sprintf("%d operations, want one", len(doc.Operations)))
	}
	var value func(path string, typ *ast.Type, sel ast.SelectionSet, v any)
	var object func(path string, sel ast.SelectionSet, obj map[string]any)
	object = func(path string, sel ast.SelectionSet, obj map[string]any) {
		for _, sel := range sel {
			f, ok := sel.(*ast.Field)
			if !ok {
				// A fragment's fields are answered only for its type
				// condition, which the answer does not name.
				diffs = append(diffs, fmt.Sprintf("%s: a fragment, which this check does not read", path))
				continue
			}
			key := f.Alias
			v, ok := obj[key]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, key))
				continue
			}
			value(path+"."+key, f.Definition.Type, f.SelectionSet, v)
		}
	}
	value = func(path string, typ *ast.Type, sel ast.SelectionSet, v any) {
		if v == nil {
			if typ.NonNull {
				diffs = append(diffs, fmt.Sprintf("%s: null, GitHub's type is %s", path, typ))
			}
			return
		}
		if typ.Elem != nil {
			items, ok := v.([]any)
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s: %v, GitHub's type is the list %s", path, v, typ))
				return
			}
			for i, item := range items {
				value(fmt.Sprintf("%s[%d]", path, i), typ.Elem, sel, item)
			}
			return
		}
		def := gh.Types[typ.NamedType]
		switch def.Kind {
		case ast.Object, ast.Interface, ast.Union:
			obj, ok := v.(map[string]any)
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s: %v, GitHub's type is the object %s", path, v, typ))
				return
			}
			object(path, sel, obj)
		case ast.Enum:
			if s, ok := v.(string); !ok || def.EnumValues.ForName(s) == nil {
				diffs = append(diffs, fmt.Sprintf("%s: %v, not a value of GitHub's enum %s", path, v, def.Name))
			}
		case ast.Scalar:
			if !scalarFits(def.Name, v) {
				diffs = append(diffs, fmt.Sprintf("%s: %v (%T), not GitHub's scalar %s", path, v, v, def.Name))
			}
		}
	}
	object("data", doc.Operations[0].SelectionSet, resp.Data)
	return diffs
}

// scalarFits reports whether v, decoded from JSON, is a value of the scalar
// name: GraphQL's built-in ones as the spec serialises them, GitHub's own
// (GitObjectID, DateTime, URI, ...) as strings.
func scalarFits(name string, v any) bool {
	switch name {
	case "Int":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f) && f >= math.MinInt32 && f <= math.MaxInt32
	case "Float":
		_, ok := v.(float64)
		return ok
	case "Boolean":
		_, ok := v.(bool)
		return ok
	default:
		_, ok := v.(string)
		return ok
	}
}

// TestAnswerDiffsSeesEveryKindOfDeparture pins that the answer check above
// can fail: the simulator's answer edited to carry an error, to lack a
// selected field, to have a non-null field null, an enum value not
// GitHub's, a scalar of another JSON type, or a list not a list, has each
// reported; a nullable field null is not; a fragment, which it does not
// read, is reported.
func TestAnswerDiffsSeesEveryKindOfDeparture(t *testing.T) {
	gh := githubSchema(t)
	doc, errs := gqlparser.LoadQueryWithRules(gh, `{ r: repository(owner: "acme", name: "app") { pullRequest(number: 1) {
		number state merged headRefOid
		commits(last: 1) { nodes { commit { oid status { contexts { context state description } } } } } } } }`, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	const good = `{"data": {"r": {"pullRequest": {"number": 1, "state": "OPEN", "merged": false, "headRefOid": "aaa",
		"commits": {"nodes": [{"commit": {"oid": "aaa", "status": {"contexts": [{"context": "ci", "state": "SUCCESS", "description": null}]}}}]}}}}}`
	for _, c := range []struct{ name, old, new, want string }{
		{"an answer GitHub's schema allows", "", "", ""},
		{"a nullable field null", `"status": {"contexts": [{"context": "ci", "state": "SUCCESS", "description": null}]}`, `"status": null`, ""},
		{"an error", `{"data"`, `{"errors": [{"message": "boom"}], "data"`, "error"},
		{"a selected field missing", `"merged": false, `, ``, "data.r.pullRequest.merged: missing"},
		{"a non-null field null", `"headRefOid": "aaa"`, `"headRefOid": null`, "data.r.pullRequest.headRefOid: null, GitHub's type is GitObjectID!"},
		{"a non-null item null", `{"context": "ci", "state": "SUCCESS", "description": null}`, `null`, "contexts[0]: null, GitHub's type is StatusContext!"},
		{"an enum value not GitHub's", `"state": "SUCCESS"`, `"state": "success"`, "contexts[0].state: success, not a value of GitHub's enum StatusState"},
		{"an Int not an integer", `"number": 1`, `"number": 1.5`, "number: 1.5 (float64), not GitHub's scalar Int"},
		{"a Boolean a string", `"merged": false`, `"merged": "false"`, "merged: false (string), not GitHub's scalar Boolean"},
		{"a custom scalar not a string", `"headRefOid": "aaa"`, `"headRefOid": 7`, "headRefOid: 7 (float64), not GitHub's scalar GitObjectID"},
		{"a list not a list", `"nodes": [{"commit": {"oid": "aaa", "status": {"contexts": [{"context": "ci", "state": "SUCCESS", "description": null}]}}}]`, `"nodes": {}`, "nodes: map[], GitHub's type is the list"},
		{"an object not an object", `"commits": {"nodes"`, `"commits": 1, "x": {"nodes"`, "commits: 1, GitHub's type is the object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			answer := strings.Replace(good, c.old, c.new, 1)
			if c.old != "" && answer == good {
				t.Fatalf("edit %q not in the answer", c.old)
			}
			wantReported(t, answerDiffs(gh, doc, []byte(answer)), c.want)
		})
	}
	t.Run("a fragment", func(t *testing.T) {
		frag, errs := gqlparser.LoadQueryWithRules(gh, `{ viewer { ... on User { login } } }`, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		wantReported(t, answerDiffs(gh, frag, []byte(`{"data": {"viewer": {"login": "octocat"}}}`)), "data.viewer: a fragment")
	})
}

// TestSimulatorSchemaIsGitHubs pins that every type the simulator's GraphQL
// schema serves is GitHub's: the same kind, every field with the same type,
// every argument with the same type, every enum value and union or
// interface member one of GitHub's.
func TestSimulatorSchemaIsGitHubs(t *testing.T) {
	gh := githubSchema(t)
	sim, err := gqlparser.LoadSchema(&ast.Source{Name: "forgesim", Input: forgesim.GraphQLSchema()})
	if err != nil {
		t.Fatalf("the simulator's schema does not load: %v", err)
	}
	diffs, types, fields := schemaDiffs(gh, sim)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("%d types and %d fields of the simulator's schema checked against GitHub's: %d differences", types, fields, len(diffs))
}

// TestSchemaDiffsSeesEveryKindOfDifference pins that the comparison above
// can fail: a schema with a type GitHub has not, a type of another kind, a
// field of another type, an unknown field, an unknown argument, an
// argument of another type, an unknown enum value, a union member and an
// interface GitHub's type has not, and another query root has each
// reported.
func TestSchemaDiffsSeesEveryKindOfDifference(t *testing.T) {
	gh := githubSchema(t)
	wrong, err := gqlparser.LoadSchema(&ast.Source{Name: "wrong", Input: `
schema { query: Query }
type Query { viewer: User! }
type User { login: String, nickname: String!, repository(name: String!, flavour: Int, followRenames: String): Repository }
type Repository { name: String! }
enum StatusState { SUCCESS SORT_OF }
type Gadget { name: String! }
type PullRequestState { name: String! }
interface Actor { login: String! }
type Commit implements Actor { login: String! }
union Assignee = User | Repository
`})
	if err != nil {
		t.Fatal(err)
	}
	diffs, _, _ := schemaDiffs(gh, wrong)
	otherRoot, err := gqlparser.LoadSchema(&ast.Source{Name: "other root", Input: "schema { query: User }\ntype User { login: String! }"})
	if err != nil {
		t.Fatal(err)
	}
	rootDiffs, _, _ := schemaDiffs(gh, otherRoot)
	got := strings.Join(append(diffs, rootDiffs...), "\n")
	for _, want := range []string{"User.login: String, GitHub's is String!", "User.nickname: not in", "User.repository(flavour): not in",
		"User.repository(followRenames): String, GitHub's is Boolean", "value SORT_OF not in", "type Gadget: not in",
		"type PullRequestState: OBJECT, GitHub's is ENUM", "type Commit: interface Actor not GitHub's", "union Assignee: member Repository not GitHub's",
		"query root: the simulator's and GitHub's differ"} {
		if !strings.Contains(got, want) {
			t.Errorf("differences %q do not report %q", got, want)
		}
	}
}

// schemaDiffs lists how sim's types differ from GitHub's gh, and counts the
// types and fields compared.
func schemaDiffs(gh, sim *ast.Schema) (diffs []string, types, fields int) {
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	for name, def := range sim.Types {
		if def.BuiltIn || strings.HasPrefix(name, "__") {
			continue
		}
		types++
		want, ok := gh.Types[name]
		if !ok {
			add("type %s: not in GitHub's schema", name)
			continue
		}
		if def.Kind != want.Kind {
			add("type %s: %s, GitHub's is %s", name, def.Kind, want.Kind)
		}
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			fields++
			wf := want.Fields.ForName(f.Name)
			if wf == nil {
				add("field %s.%s: not in GitHub's schema", name, f.Name)
				continue
			}
			if f.Type.String() != wf.Type.String() {
				add("field %s.%s: %s, GitHub's is %s", name, f.Name, f.Type, wf.Type)
			}
			for _, a := range f.Arguments {
				wa := wf.Arguments.ForName(a.Name)
				switch {
				case wa == nil:
					add("argument %s.%s(%s): not in GitHub's schema", name, f.Name, a.Name)
				case a.Type.String() != wa.Type.String():
					add("argument %s.%s(%s): %s, GitHub's is %s", name, f.Name, a.Name, a.Type, wa.Type)
				}
			}
		}
		for _, v := range def.EnumValues {
			if want.EnumValues.ForName(v.Name) == nil {
				add("enum %s: value %s not in GitHub's schema", name, v.Name)
			}
		}
		for _, m := range def.Types {
			if !slices.Contains(want.Types, m) {
				add("union %s: member %s not GitHub's", name, m)
			}
		}
		for _, i := range def.Interfaces {
			if !slices.Contains(want.Interfaces, i) {
				add("type %s: interface %s not GitHub's", name, i)
			}
		}
	}
	if sim.Query == nil || gh.Query == nil || sim.Query.Name != gh.Query.Name {
		add("query root: the simulator's and GitHub's differ")
	}
	return diffs, types, fields
}
