package proxy

import "testing"

func TestKeyPattern(t *testing.T) {
	for _, bad := range []string{"", "items/{id}", "/items/id", "/items/{id", "/items/x{id}", "/a/{p...}/b", "/a/{x}/{x}", "/a/{}", "/a/{b-c}"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	for _, tt := range []struct {
		pattern, path, key string
		ok                 bool
	}{
		{"/v1/items/{id}", "/v1/items/a", "a", true},
		{"/v1/items/{id}", "/v1/items/%61", "a", true},
		{"/v1/items/{id}", "/v1/items/a%20b", "a b", true},
		{"/v1/items/{id}", "/v1/items/a/b", "", false},
		{"/v1/items/{id}", "/v1/items/", "", false},
		{"/v1/items/{id}", "/v1/items/%2F", "", false},
		{"/v1/items/{id}", "/v1/items/.", "", false},
		{"/v1/items/{id}", "/v1/items/%2e%2e", "", false},
		{"/v1/items/{id}", "/v1/item/a", "", false},
		{"/v1/items/{id}", "/v1/items/%zz", "", false},
		{"/t/{t}/d/{d}", "/t/x/d/y", "x/y", true},
		{"/t/{t}/d/{d}", "/t/x/d", "", false},
		{"/files/{path...}", "/files/a/b/c", "a/b/c", true},
		{"/files/{path...}", "/files/a", "a", true},
		{"/files/{path...}", "/files", "", false},
		{"/files/{path...}", "/files/a//b", "", false},
		{"/files/{path...}", "/files/a/../b", "", false},
		{"/files/{path...}", "/files/a%2Fb", "", false},
	} {
		p, err := parsePattern(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		key, ok := p.key(tt.path)
		if key != tt.key || ok != tt.ok {
			t.Errorf("%s on %s = %q, %v; want %q, %v", tt.pattern, tt.path, key, ok, tt.key, tt.ok)
		}
	}
}
