package acl

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzParseBearer checks the Authorization parser: whatever it accepts is
// exactly the text after "Bearer ", in token syntax, and authenticating any
// header never panics and finds a principal only for a listed secret.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer " + readerSecret, "Bearer  x", "Basic dXNlcjpwYXNz", "", "Bearer", "Bearer a==", "Bearer =", "bEaReR " + operatorSecret + " ", "Bearer \xff"} {
		f.Add(s)
	}
	a, err := Parse([]byte(testFile))
	if err != nil {
		f.Fatal(err)
	}
	secrets := map[string]bool{readerSecret: true, clientSecret: true, operatorSecret: true, scopedSecret: true}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := ParseBearer(header)
		if ok {
			if !strings.EqualFold(header[:7], "bearer ") || header[7:] != tok || !b64token.MatchString(tok) {
				t.Fatalf("ParseBearer(%q) = %q", header, tok)
			}
		} else if tok != "" {
			t.Fatalf("ParseBearer(%q) refused but returned %q", header, tok)
		}
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.Header["Authorization"] = []string{header}
		p, err := a.Authenticate(req)
		if (p != nil) != (ok && secrets[tok]) || (p == nil) == (err == nil) {
			t.Fatalf("Authenticate(%q) = %v, %v", header, p, err)
		}
	})
}
