package githubcontract_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestVendoredFilesMatchTheirChecksums pins the vendored material to what
// vendorgithub wrote from the pinned packages (testdata/README.md): every
// file under testdata but the README, the licences and SHA256SUMS itself is
// listed in testdata/SHA256SUMS, and its SHA-256 is the one listed. A file
// edited by hand, or added without regenerating, fails.
func TestVendoredFilesMatchTheirChecksums(t *testing.T) {
	sums, err := os.ReadFile("testdata/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, path, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 2*sha256.Size {
			t.Fatalf("SHA256SUMS line %q: want <64 hex digits>  <path>", sc.Text())
		}
		listed[path] = sum
	}
	testdata := os.DirFS("testdata")
	vendored := 0
	err = fs.WalkDir(testdata, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == "README.md" || path == "SHA256SUMS" || strings.HasPrefix(path, "licenses/") {
			return err
		}
		vendored++
		want, ok := listed[path]
		if !ok {
			t.Errorf("%s: vendored but not in SHA256SUMS: regenerate with vendorgithub", path)
			return nil
		}
		delete(listed, path)
		b, err := fs.ReadFile(testdata, path)
		if err != nil {
			return err
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Errorf("%s: SHA-256 %x, SHA256SUMS says %s: the file is not what vendorgithub wrote", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range listed {
		t.Errorf("%s: in SHA256SUMS but not vendored", path)
	}
	if vendored == 0 {
		t.Fatal("no vendored file found: nothing was checked")
	}
}
