package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// codeTables are the files where each client maps the API's error codes,
// between a line containing "fencer:codes begin" and one containing
// "fencer:codes end" (in any comment syntax).
var codeTables = []string{
	"clients/python/fencer/errors.py",
	"clients/typescript/src/errors.ts",
	"clients/java/src/main/java/io/fencer/client/FencerException.java",
}

// quotedCode is a quoted snake_case string: a code, as every client's
// table spells it.
var quotedCode = regexp.MustCompile(`"([a-z][a-z0-9]*(?:_[a-z0-9]+)*)"`)

// TestClientCodesExist: every error code a client maps is one of
// wire.Codes(), the codes the server can answer (a misspelt or invented
// code would never match). A table not written yet is skipped, or fails
// when FENCER_REQUIRE_CLIENTS=1.
func TestClientCodesExist(t *testing.T) {
	codes := wire.Codes()
	for _, rel := range codeTables {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("..", "..", rel))
			if os.IsNotExist(err) {
				notBuilt(t, err)
			} else if err != nil {
				t.Fatal(err)
			}
			mapped := tableCodes(t, string(src))
			if len(mapped) == 0 {
				t.Fatalf("%s: no quoted code between its fencer:codes markers", rel)
			}
			for _, c := range mapped {
				if !slices.Contains(codes, c) {
					t.Errorf("%s maps %q, which is not one of api/wire's codes", rel, c)
				}
			}
		})
	}
}

// tableCodes returns the quoted codes between the markers; it fails when
// a marker is missing.
func tableCodes(t *testing.T, src string) []string {
	t.Helper()
	var out []string
	in, begun, ended := false, false, false
	for line := range strings.Lines(src) {
		switch {
		case strings.Contains(line, "fencer:codes begin"):
			in, begun = true, true
		case strings.Contains(line, "fencer:codes end"):
			in, ended = false, true
		case in:
			for _, m := range quotedCode.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
	}
	if !begun || !ended {
		t.Fatal("no fencer:codes begin/end markers")
	}
	return out
}
