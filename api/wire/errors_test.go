package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCodesListsEveryCode: a Code constant missing from Codes would escape
// the client's check that it knows every code.
func TestCodesListsEveryCode(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	declared := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					if strings.HasPrefix(name.Name, "Code") {
						declared[name.Name], _ = strconv.Unquote(v.Values[i].(*ast.BasicLit).Value)
					}
				}
			}
		}
	}
	listed := map[string]bool{}
	for _, c := range Codes() {
		if listed[c] {
			t.Errorf("Codes lists %q twice", c)
		}
		listed[c] = true
	}
	values := map[string]bool{}
	for name, value := range declared {
		if values[value] {
			t.Errorf("code %q is declared twice", value)
		}
		values[value] = true
		if !listed[value] {
			t.Errorf("%s (%q) is missing from Codes", name, value)
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("Codes lists %d codes, %d are declared", len(listed), len(declared))
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusConflict, &Error{Code: CodeStaleToken, Message: "m", LastToken: 7})
	if w.Code != http.StatusConflict || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	// The bytes every writer of error bodies produced before there was one.
	if got, want := w.Body.String(), `{"error":"m","code":"stale_token","last_token":7}`+"\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
}

// The contract stands alone: another language's port, or the client, can
// depend on it without anything of fencer.
func TestWireImportsNothingOfFencer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "fencer-io/fencer") && !strings.HasSuffix(dep, "/api/wire") {
			t.Errorf("api/wire depends on %s", dep)
		}
	}
}
