package doctable

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinksResolve pins the links between README.md, CHANGELOG.md and
// docs/*.md: every relative link names a file of the repository, and
// every #anchor one of the target's headings, as GitHub derives them (see
// anchor). A section renamed without its links would otherwise leave a
// newcomer at the top of a 100 KB file.
func TestDocLinksResolve(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"))
	anchors := map[string]map[string]bool{} // file: its headings' anchors
	text := map[string]string{}
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text[path] = fenced.ReplaceAllString(string(b), "")
		anchors[path] = map[string]bool{}
		seen := map[string]int{}
		for _, m := range heading.FindAllStringSubmatch(text[path], -1) {
			a := anchor(m[1])
			if n := seen[a]; n > 0 {
				anchors[path][a+"-"+strconv.Itoa(n)] = true // GitHub's second "x" is x-1
			} else {
				anchors[path][a] = true
			}
			seen[a]++
		}
	}
	for _, path := range docs {
		rel, _ := filepath.Rel(root, path)
		for _, m := range link.FindAllStringSubmatch(text[path], -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, m[1])
					continue
				}
			}
			if frag != "" && anchors[file] != nil && !anchors[file][frag] {
				t.Errorf("%s links to %s: no heading of %s has the anchor #%s", rel, m[1], filepath.Base(file), frag)
			}
		}
	}
}

// anchor is a heading's anchor as GitHub makes it: lower case, each space
// a hyphen, every character but letters, digits, hyphens and underscores
// dropped (so "The forge client (`pkg/forge`)" is the-forge-client-pkgforge).
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	fenced  = regexp.MustCompile("(?s)```.*?```")
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)
