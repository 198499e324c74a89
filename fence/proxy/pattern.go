package proxy

import (
	"fmt"
	"net/url"
	"strings"
)

// WholeUpstream is the one fence key of a proxy without a key pattern.
const WholeUpstream = "*"

// keyPattern takes a request's fence key from its path: "/v1/items/{id}"
// fences each item on its own, "/tenants/{t}/docs/{doc}" each document, and
// "/files/{path...}" each file under /files. The key is the wildcards'
// values, unescaped and joined by "/".
type keyPattern struct {
	raw  string
	segs []patternSeg
}

type patternSeg struct {
	lit  string // the literal segment, when not a wildcard
	wild bool   // {name}: one segment
	rest bool   // {name...}: every segment left, at least one
}

// parsePattern checks a pattern: an absolute path of literal segments and
// {name} wildcards, of which the last may be {name...}, with at least one.
func parsePattern(raw string) (*keyPattern, error) {
	if !strings.HasPrefix(raw, "/") {
		return nil, fmt.Errorf("key pattern %q: want an absolute path such as /v1/items/{id}", raw)
	}
	p := &keyPattern{raw: raw}
	names := map[string]bool{}
	parts := strings.Split(raw[1:], "/")
	for i, part := range parts {
		if !strings.HasPrefix(part, "{") {
			if strings.ContainsAny(part, "{}") {
				return nil, fmt.Errorf("key pattern %q: segment %q: a wildcard is a whole segment, {name}", raw, part)
			}
			p.segs = append(p.segs, patternSeg{lit: part})
			continue
		}
		name, ok := strings.CutSuffix(part[1:], "}")
		if !ok {
			return nil, fmt.Errorf("key pattern %q: segment %q is not closed by }", raw, part)
		}
		seg := patternSeg{wild: true}
		if n, ok := strings.CutSuffix(name, "..."); ok {
			if i != len(parts)-1 {
				return nil, fmt.Errorf("key pattern %q: only the last segment may be {%s}", raw, name)
			}
			name, seg = n, patternSeg{rest: true}
		}
		if !validWildcard(name) || names[name] {
			return nil, fmt.Errorf("key pattern %q: wildcard names are letters, digits and _, each used once", raw)
		}
		names[name] = true
		p.segs = append(p.segs, seg)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("key pattern %q has no {wildcard}: omit the pattern for one fence for the whole upstream", raw)
	}
	return p, nil
}

func validWildcard(name string) bool {
	for _, c := range name {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return name != ""
}

// key returns the fence key of a request path (u.EscapedPath()), or false
// when the path does not match. Paths whose wildcard segments are empty,
// "." or "..", or hold an escaped "/", do not match: an upstream that
// cleans or decodes them would write another resource than the key names,
// and a write the proxy cannot name is refused rather than let through.
func (p *keyPattern) key(escapedPath string) (string, bool) {
	if !strings.HasPrefix(escapedPath, "/") {
		return "", false
	}
	parts := strings.Split(escapedPath[1:], "/")
	var vals []string
	for i, seg := range p.segs {
		if i >= len(parts) {
			return "", false
		}
		if seg.rest {
			for _, part := range parts[i:] {
				v, ok := segmentValue(part)
				if !ok {
					return "", false
				}
				vals = append(vals, v)
			}
			return strings.Join(vals, "/"), true
		}
		v, err := url.PathUnescape(parts[i])
		if err != nil {
			return "", false
		}
		if !seg.wild {
			if v != seg.lit {
				return "", false
			}
			continue
		}
		if v, ok := segmentValue(parts[i]); ok {
			vals = append(vals, v)
			continue
		}
		return "", false
	}
	if len(parts) != len(p.segs) {
		return "", false
	}
	return strings.Join(vals, "/"), true
}

func segmentValue(escaped string) (string, bool) {
	v, err := url.PathUnescape(escaped)
	if err != nil || v == "" || v == "." || v == ".." || strings.Contains(v, "/") {
		return "", false
	}
	return v, true
}
