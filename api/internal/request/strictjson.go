package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fencer-io/fencer/api/wire"
)

// maxJSONDepth bounds the nesting strictJSON walks; no request body nests
// at all.
const maxJSONDepth = 32

// badStringCodes names the error code for a field whose string is not valid
// UTF-8; any other field's is invalid_json.
var badStringCodes = map[string]string{
	"holder":     wire.CodeInvalidHolder,
	"request_id": wire.CodeInvalidRequestID,
}

// strictJSON refuses what encoding/json would quietly accept in a request
// body meant for v (a pointer to a struct): a document that is not one
// object; a key that appears twice in an object (encoding/json keeps the
// last); a field name that matches one of v's only case-insensitively
// (encoding/json accepts "HOLDER" for "holder"); and a string with invalid
// UTF-8 or a lone UTF-16 surrogate escape, which encoding/json turns into
// U+FFFD, so that two different holders would become one. Unknown fields and
// syntax errors are left to the decoder that runs next.
func strictJSON(body []byte, v any) error {
	fields := jsonFields(v)
	if done, err := strictFlatJSON(body, fields); done {
		return err
	}
	return strictJSONWalk(body, fields)
}

// strictJSONWalk is strictJSON for any document, through encoding/json's
// tokenizer.
func strictJSONWalk(body []byte, fields map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return badRequest(wire.CodeInvalidJSON, "request body: want a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec, seen)
		if err != nil {
			return err
		}
		if err := exactName(key, fields); err != nil {
			return err
		}
		start := dec.InputOffset()
		if err := skipValue(dec, 1); err != nil {
			return err
		}
		if badString(body[start:dec.InputOffset()]) {
			code, ok := badStringCodes[key]
			if !ok {
				code = wire.CodeInvalidJSON
			}
			return badRequest(code, fmt.Sprintf("request body: field %q: a string with invalid UTF-8 or a lone surrogate escape", key))
		}
	}
	return nil
}

// exactName refuses a key that names one of fields only case-insensitively.
func exactName(key string, fields map[string]bool) error {
	if !fields[key] {
		for f := range fields {
			if strings.EqualFold(f, key) {
				return badRequest(wire.CodeInvalidJSON, fmt.Sprintf("request body: field %q: names are case-sensitive; want %q", key, f))
			}
		}
	}
	return nil
}

// duplicateKey is objectKey's error for a key seen before.
func duplicateKey(key string) error {
	return badRequest(wire.CodeInvalidJSON, fmt.Sprintf("request body: field %q appears twice", key))
}

// strictFlatJSON is strictJSON's fast path for what clients send: one flat
// object, valid JSON, whose keys and strings hold no escapes and whose
// strings are valid UTF-8. It decides such a body exactly as the walk would
// (done true, and its error), in a single pass without allocating; anything
// else (nesting, an escape, invalid UTF-8, a syntax error, more than 16
// keys, trailing data) it leaves to the walk (done false).
func strictFlatJSON(body []byte, fields map[string]bool) (done bool, err error) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false, nil
	}
	var seenKeys [16][]byte
	seen := seenKeys[:0]
	if i = skipSpace(body, i+1); i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body), nil
	}
	for {
		key, j, ok := plainString(body, i)
		if !ok || len(seen) == len(seenKeys) {
			return false, nil
		}
		if i = skipSpace(body, j); i >= len(body) || body[i] != ':' {
			return false, nil
		}
		if i = skipSpace(body, i+1); i >= len(body) {
			return false, nil
		}
		if body[i] == '"' {
			_, j, ok = plainString(body, i)
		} else {
			j, ok = plainLiteral(body, i)
		}
		if !ok {
			return false, nil
		}
		// Errors in key order, as the walk finds them; the values are
		// known valid, so the walk would reach this key too.
		for _, k := range seen {
			if string(k) == string(key) {
				return true, duplicateKey(string(key))
			}
		}
		if !fields[string(key)] {
			if err := exactName(string(key), fields); err != nil {
				return true, err
			}
		}
		seen = append(seen, key)
		if i = skipSpace(body, j); i >= len(body) {
			return false, nil
		}
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
		case '}':
			return skipSpace(body, i+1) == len(body), nil
		default:
			return false, nil
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string at b[i] if it has no escape and is valid
// UTF-8: its contents, and the index after its closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			return s, j + 1, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// plainLiteral reads the number, true, false or null at b[i], if it is
// valid JSON: the index after it.
func plainLiteral(b []byte, i int) (int, bool) {
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		j = digits(j)
	default:
		return 0, false
	}
	if j < len(b) && b[j] == '.' {
		k := digits(j + 1)
		if k == j+1 {
			return 0, false
		}
		j = k
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return 0, false
		}
		j = k
	}
	return j, true
}

// objectKey reads the next key of an object and refuses one already seen.
func objectKey(dec *json.Decoder, seen map[string]bool) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	key, _ := tok.(string) // inside an object, Token returns only string keys
	if seen[key] {
		return "", duplicateKey(key)
	}
	seen[key] = true
	return key, nil
}

// skipValue reads one value, refusing duplicate keys in nested objects.
func skipValue(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return badRequest(wire.CodeInvalidJSON, "request body: nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		if d == '{' {
			if _, err := objectKey(dec, seen); err != nil {
				return err
			}
		}
		if err := skipValue(dec, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	return nil
}

// fieldsByType caches jsonFields per type: a request body's type is one of
// a few, and reflection on every request costs more than the rest of the
// check.
var fieldsByType sync.Map // reflect.Type → map[string]bool

// jsonFields returns the JSON names of the fields of the struct v points
// to. The map is shared: never modify it.
func jsonFields(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]bool)
	}
	m := structFields(t)
	fieldsByType.Store(t, m)
	return m
}

func structFields(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && f.Tag.Get("json") == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// badString reports whether a piece of valid JSON text holds invalid UTF-8
// or a \u escape of a UTF-16 surrogate that is not part of a pair. Outside
// strings, valid JSON has no backslashes, so no string tracking is needed.
func badString(raw []byte) bool {
	if !utf8.Valid(raw) {
		return true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw[i+1:])
		if !ok {
			return true
		}
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 || i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
			return true // a low surrogate first, or a high one alone
		}
		if lo, ok := hex4(raw[i+3:]); !ok || lo < 0xdc00 || lo > 0xdfff {
			return true
		}
		i += 6
	}
	return false
}

// hex4 parses the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
