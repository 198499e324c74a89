package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return badRequest(wire.CodeInvalidJSON, "request body: want a JSON object")
	}
	fields := jsonFields(v)
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec, seen)
		if err != nil {
			return err
		}
		if !fields[key] {
			for f := range fields {
				if strings.EqualFold(f, key) {
					return badRequest(wire.CodeInvalidJSON, fmt.Sprintf("request body: field %q: names are case-sensitive; want %q", key, f))
				}
			}
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

// objectKey reads the next key of an object and refuses one already seen.
func objectKey(dec *json.Decoder, seen map[string]bool) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	key, _ := tok.(string) // inside an object, Token returns only string keys
	if seen[key] {
		return "", badRequest(wire.CodeInvalidJSON, fmt.Sprintf("request body: field %q appears twice", key))
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

// jsonFields returns the JSON names of the fields of the struct v points to.
func jsonFields(v any) map[string]bool {
	t := reflect.TypeOf(v)
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
