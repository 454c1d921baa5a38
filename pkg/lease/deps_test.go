package lease_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyTheStandardLibrary pins the package's promise: a user of the
// election seam compiles no database driver and no metrics library. It asks
// `go list -deps` for every dependency of pkg/lease outside the standard
// library, the package itself aside.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	const self = "iterion.dev/iterion/pkg/lease"
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", self).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", self, err)
	}
	var nonStd []string
	for _, p := range strings.Fields(string(out)) {
		if p != self {
			nonStd = append(nonStd, p)
		}
	}
	if len(nonStd) != 0 {
		t.Errorf("got non-standard dependencies %v, want none: pkg/lease imports only the standard library", nonStd)
	}
}
