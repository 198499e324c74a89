package api

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/wire"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid description: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml: version %s, want 3.1", doc.OpenAPI)
	}
	return doc
}

// servedRoutes walks the router and returns "METHOD /path" for every route it
// serves, with chi's trailing slash of a mounted router's root dropped.
func servedRoutes(t *testing.T, h http.Handler) []string {
	t.Helper()
	var out []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/ui" || strings.HasPrefix(route, "/ui/") {
			return nil // the dashboard's files (internal/ui) are not the API
		}
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/")
		}
		out = append(out, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func describedRoutes(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIDescribesEveryRoute: a route added to the router without a
// description, or a description of a route that is not served, fails.
// (/debug/pprof, served only with --pprof, is Go's, and /ui/ is the
// dashboard's files: neither is part of the contract.)
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	s := NewServer(&fakeCluster{leader: true}, &fakeCluster{leader: true}, nil)
	served := servedRoutes(t, s.Handler())
	described := describedRoutes(doc)
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("served but not described in openapi.yaml: %s", r)
		}
	}
	for _, r := range described {
		if !slices.Contains(served, r) {
			t.Errorf("described in openapi.yaml but not served: %s", r)
		}
	}
	if len(served) < 20 {
		t.Errorf("walked only %d routes: %v", len(served), served)
	}
}

// TestOpenAPIErrorCodes: the ErrorCode enum is exactly wire.Codes().
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("openapi.yaml has no ErrorCode schema")
	}
	var described []string
	for _, v := range ref.Value.Enum {
		described = append(described, v.(string))
	}
	codes := wire.Codes()
	for _, c := range codes {
		if !slices.Contains(described, c) {
			t.Errorf("error code %q is in api/wire but not in openapi.yaml's ErrorCode enum", c)
		}
	}
	for _, c := range described {
		if !slices.Contains(codes, c) {
			t.Errorf("openapi.yaml's ErrorCode enum has %q, which api/wire does not define", c)
		}
	}
}

// TestOpenAPIServed: GET /v1/openapi.yaml answers the embedded description.
func TestOpenAPIServed(t *testing.T) {
	s := NewServer(&fakeCluster{leader: true}, &fakeCluster{leader: true}, nil)
	status, _, h := do(t, s.Handler(), call{method: http.MethodGet, path: "/v1/openapi.yaml"})
	if status != http.StatusOK || h.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml: %d %s", status, h.Get("Content-Type"))
	}
}
