package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// description is a small OpenAPI description: pulls/get, whose answer
// refers to pull (which refers to user, through an items list, which
// refers back to pull), and an operation and a component not taken;
// examples at two depths.
const description = `{
 "openapi": "3.0.3", "info": {"version": "1"},
 "paths": {
  "/repos/{owner}/{repo}/pulls/{pull_number}": {"get": {"operationId": "pulls/get",
   "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/pull"},
    "examples": {"default": {"$ref": "#/components/examples/pull"}}}}}}}},
  "/emojis": {"get": {"operationId": "emojis/get", "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/emoji"}}}}}}}
 },
 "components": {
  "schemas": {
   "pull": {"type": "object", "properties": {"assignees": {"type": "array", "items": {"$ref": "#/components/schemas/user"}}}, "example": {"assignees": []}},
   "user": {"type": "object", "properties": {"login": {"type": "string", "example": "octocat"}, "last_pull": {"$ref": "#/components/schemas/pull"}}},
   "emoji": {"type": "object"}
  },
  "examples": {"pull": {"value": {}}}
 }
}`

// TestTrimOpenAPIKeepsWhatTheOperationsReference pins the REST subset's
// rule: the operations of Operations, with every component they refer to,
// at any depth and through a cycle, and nothing else; every example and examples key dropped;
// an operation of Operations the description lacks is an error.
func TestTrimOpenAPIKeepsWhatTheOperationsReference(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "api.json"), filepath.Join(dir, "rest-subset.json")
	if err := os.WriteFile(in, []byte(description), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(ops []string) { Operations = ops }(Operations)
	Operations = []string{"pulls/get"}
	if err := trimOpenAPI(in, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Paths      map[string]any            `json:"paths"`
		Components map[string]map[string]any `json:"components"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	var paths, schemas []string
	for p := range got.Paths {
		paths = append(paths, p)
	}
	for s := range got.Components["schemas"] {
		schemas = append(schemas, s)
	}
	slices.Sort(schemas)
	if !slices.Equal(paths, []string{"/repos/{owner}/{repo}/pulls/{pull_number}"}) || !slices.Equal(schemas, []string{"pull", "user"}) {
		t.Errorf("kept paths %v and schemas %v, want pulls/get's path and pull and user, which it refers to", paths, schemas)
	}
	if strings.Contains(string(raw), `"example`) || got.Components["examples"] != nil {
		t.Errorf("subset keeps an example:\n%s", raw)
	}
	Operations = []string{"pulls/get", "pulls/merge"}
	if err := trimOpenAPI(in, out); err == nil || !strings.Contains(err.Error(), "pulls/merge") {
		t.Errorf("trim with an operation the description lacks = %v, want an error naming it", err)
	}
}

// TestPickPayloadsTakesTheFirstExampleOfEachAction pins the webhook
// examples' rule: for each of Payloads, the first example of the event
// with that action ("" for none), written as <event>[.<action>].json; one
// not recorded is an error.
func TestPickPayloadsTakesTheFirstExampleOfEachAction(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "index.json")
	index := `[{"name": "status", "examples": [{"sha": "first"}, {"sha": "second"}]},
		{"name": "issues", "examples": [{"action": "opened", "n": 1}, {"action": "deleted", "n": 2}, {"action": "deleted", "n": 3}]}]`
	if err := os.WriteFile(in, []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(p [][2]string) { Payloads = p }(Payloads)
	Payloads = [][2]string{{"status", ""}, {"issues", "deleted"}}
	if err := pickPayloads(in, dir); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"status.json": `"sha": "first"`, "issues.deleted.json": `"n": 2`} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s = %s, %v; want the first example, with %s", file, b, err, want)
		}
	}
	Payloads = [][2]string{{"issues", "transferred"}}
	if err := pickPayloads(in, dir); err == nil || !strings.Contains(err.Error(), "transferred") {
		t.Errorf("pick of an action not recorded = %v, want an error naming it", err)
	}
}

// TestWriteSumsListsEachFile pins SHA256SUMS: one line per file, sorted by
// path, as sha256sum writes it.
func TestWriteSumsListsEachFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "webhooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"schema.graphql": "", "webhooks/status.json": "abc"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSums(dir, []string{"webhooks/status.json", "schema.graphql"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	// The SHA-256 of "" and of "abc" (FIPS 180-2's first example).
	want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  schema.graphql\n" +
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  webhooks/status.json\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS =\n%s\nwant\n%s", got, want)
	}
}
