// Command vendorgithub writes the subset of GitHub's published material the
// contract tests read, from the unpacked npm packages named in
// internal/testing/githubcontract/testdata/README.md:
//
//   - from @octokit/openapi's generated/api.github.com.json, the REST
//     operations the forge client calls (Operations) and every component
//     they reference, refs kept, examples left out, as rest-subset.json;
//   - from @octokit/webhooks-examples' api.github.com/index.json, the first
//     example of each event and action in Payloads, as webhooks/<event>.<action>.json;
//   - @octokit/graphql-schema's schema.graphql, copied whole;
//   - SHA256SUMS, the SHA-256 of each file above, as sha256sum writes it,
//     which the contract tests check the files against.
//
// Run from the module root:
//
//	go run ./internal/testing/githubcontract/vendorgithub \
//	  -openapi DIR/generated/api.github.com.json \
//	  -webhooks DIR/api.github.com/index.json \
//	  -graphql DIR/schema.graphql \
//	  -out internal/testing/githubcontract/testdata
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Operations are the operationIds of every REST call the forge client
// makes (pkg/forge/github.go; ghinstallation mints installation tokens;
// the App client, pkg/forge/app.go and app_verify.go, lists installations,
// finds a repository's and checks one is still there, and lists an
// installation's repositories with its token).
var Operations = []string{
	"pulls/get",
	"repos/get-combined-status-for-ref",
	"repos/create-commit-status",
	"issues/list-for-repo",
	"issues/get",
	"apps/create-installation-access-token",
	"apps/list-installations",
	"apps/get-repo-installation",
	"apps/get-installation",
	"apps/list-repos-accessible-to-installation",
}

// Payloads are the webhook examples vendored: event and action ("" for an
// event without actions).
var Payloads = [][2]string{
	{"pull_request", "opened"},
	{"pull_request", "synchronize"},
	{"pull_request", "closed"},
	{"status", ""},
	{"installation", "created"},
	{"installation", "deleted"},
	{"installation", "suspend"},
	{"installation", "unsuspend"},
	{"installation_repositories", "added"},
	{"installation_repositories", "removed"},
	{"issues", "deleted"},
	{"issues", "transferred"},
}

func main() {
	openapi := flag.String("openapi", "", "path of @octokit/openapi's generated/api.github.com.json")
	webhooks := flag.String("webhooks", "", "path of @octokit/webhooks-examples' api.github.com/index.json")
	graphql := flag.String("graphql", "", "path of @octokit/graphql-schema's schema.graphql")
	out := flag.String("out", "", "directory to write into")
	flag.Parse()
	if *openapi == "" || *webhooks == "" || *graphql == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*openapi, *webhooks, *graphql, *out); err != nil {
		log.Fatal(err)
	}
}

func run(openapi, webhooks, graphql, out string) error {
	if err := os.MkdirAll(filepath.Join(out, "webhooks"), 0o755); err != nil {
		return err
	}
	if err := trimOpenAPI(openapi, filepath.Join(out, "rest-subset.json")); err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	if err := pickPayloads(webhooks, filepath.Join(out, "webhooks")); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	schema, err := os.ReadFile(graphql)
	if err != nil {
		return fmt.Errorf("graphql: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "schema.graphql"), schema, 0o644); err != nil {
		return err
	}
	files := []string{"rest-subset.json", "schema.graphql"}
	for _, p := range Payloads {
		files = append(files, payloadFile(p[0], p[1]))
	}
	return writeSums(out, files)
}

// writeSums writes dir/SHA256SUMS: the SHA-256 of each of files (paths
// relative to dir, with slashes), sorted by path, in sha256sum's format.
func writeSums(dir string, files []string) error {
	slices.Sort(files)
	var buf bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "%x  %s\n", sha256.Sum256(b), f)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), buf.Bytes(), 0o644)
}

// payloadFile is the path, under the output directory, of the example of
// event name with action.
func payloadFile(name, action string) string {
	if action != "" {
		name += "." + action
	}
	return "webhooks/" + name + ".json"
}

// trimOpenAPI writes the description's Operations and the components they
// reference, transitively.
func trimOpenAPI(in, out string) error {
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Info       map[string]any                        `json:"info"`
		Paths      map[string]map[string]any             `json:"paths"`
		Components map[string]map[string]json.RawMessage `json:"components"`
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	paths := map[string]map[string]any{}
	found := map[string]bool{}
	var refs []string
	for path, item := range doc.Paths {
		for method, op := range item {
			m, ok := op.(map[string]any)
			if !ok || !slices.Contains(Operations, fmt.Sprint(m["operationId"])) {
				continue
			}
			found[fmt.Sprint(m["operationId"])] = true
			if paths[path] == nil {
				paths[path] = map[string]any{}
			}
			clean := dropExamples(m)
			paths[path][method] = clean
			refs = collectRefs(clean, refs)
		}
	}
	for _, id := range Operations {
		if !found[id] {
			return fmt.Errorf("operation %s not in the description", id)
		}
	}
	components := map[string]map[string]any{}
	seen := map[string]bool{}
	for len(refs) > 0 {
		ref := refs[len(refs)-1]
		refs = refs[:len(refs)-1]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		if !ok || !strings.HasPrefix(ref, "#/components/") {
			return fmt.Errorf("ref %s is not a component", ref)
		}
		body, ok := doc.Components[kind][name]
		if !ok {
			return fmt.Errorf("ref %s not found", ref)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		v = dropExamples(v)
		if components[kind] == nil {
			components[kind] = map[string]any{}
		}
		components[kind][name] = v
		refs = collectRefs(v, refs)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(map[string]any{
		"openapi": doc.OpenAPI, "info": doc.Info, "paths": paths, "components": components,
	}); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// dropExamples returns v without its example and examples keys, at any
// depth: the subset is for validating, and examples are most of its size.
func dropExamples(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if k == "example" || k == "examples" {
				continue
			}
			out[k] = dropExamples(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = dropExamples(e)
		}
		return out
	}
	return v
}

// collectRefs appends every $ref under v to refs.
func collectRefs(v any, refs []string) []string {
	switch t := v.(type) {
	case map[string]any:
		if r, ok := t["$ref"].(string); ok {
			refs = append(refs, r)
		}
		for _, e := range t {
			refs = collectRefs(e, refs)
		}
	case []any:
		for _, e := range t {
			refs = collectRefs(e, refs)
		}
	}
	return refs
}

// event is one event of the examples' index.json.
type event struct {
	Name     string            `json:"name"`
	Examples []json.RawMessage `json:"examples"`
}

// pickPayloads writes the first example of each of Payloads.
func pickPayloads(in, dir string) error {
	var events []event
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &events); err != nil {
		return err
	}
	for _, p := range Payloads {
		if err := pickOne(events, p[0], p[1], dir); err != nil {
			return err
		}
	}
	return nil
}

// pickOne writes the first example of name with action.
func pickOne(events []event, name, action, dir string) error {
	for _, e := range events {
		if e.Name != name {
			continue
		}
		for _, ex := range e.Examples {
			var head struct {
				Action string `json:"action"`
			}
			if err := json.Unmarshal(ex, &head); err != nil {
				return err
			}
			if head.Action != action {
				continue
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, ex, "", "  "); err != nil {
				return err
			}
			buf.WriteByte('\n')
			return os.WriteFile(filepath.Join(dir, filepath.Base(payloadFile(name, action))), buf.Bytes(), 0o644)
		}
	}
	return fmt.Errorf("no example of %s %q", name, action)
}
