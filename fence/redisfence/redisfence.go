package redisfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencer-io/fencer/fence"
)

// MarkPrefix prefixes the key of every scope's mark.
const MarkPrefix = "fencer:high_water:"

// MarkKey returns the key of scope's mark, a hash with fields token and seq.
func MarkKey(scope string) string { return MarkPrefix + scope }

// ScriptSource is the Lua script that checks and advances a mark. The Python
// client (clients/python, fencer.redis_fence) runs the same text, so Go and
// Python writers of one scope share one rule and one script cache entry.
//
//go:embed fence.lua
var ScriptSource string

var script = redis.NewScript(ScriptSource)

// Errors specific to Redis. Refusals use the fence package's errors
// (fence.ErrMissingToken, fence.ErrStaleToken) so errors.Is works the same
// against every backend.
var (
	// ErrBadCommand means a Cmd cannot be sent: no name, no key, an empty
	// key, or a key that is a mark (MarkPrefix), which a fenced write must
	// not be able to overwrite.
	ErrBadCommand = errors.New("redisfence: bad command")

	// ErrCorruptMark means a scope's mark key holds something other than
	// two canonical decimals. The write is refused rather than guessed at.
	ErrCorruptMark = errors.New("redisfence: corrupt high-water mark")
)

// CommandError reports an admitted write refused because one of its
// commands failed in Redis: every key the commands named was put back as it
// was and the mark did not move.
type CommandError struct {
	Index int    // of the failed command in the call, from 0
	Name  string // its name
	Err   string // Redis's error
}

// Error describes the failure.
func (e *CommandError) Error() string {
	return fmt.Sprintf("redisfence: command %d (%s) failed, nothing written: %s", e.Index, e.Name, e.Err)
}

// Cmd is one Redis command to run behind a fence: Name, then Keys, then
// Args, as in SET key value. Every key the command touches must be in Keys
// (Redis Cluster routes by them and the script saves them for a rollback).
type Cmd struct {
	Name string
	Keys []string
	Args []any
}

// Set is SET key value.
func Set(key string, value any) Cmd {
	return Cmd{Name: "SET", Keys: []string{key}, Args: []any{value}}
}

// HSet is HSET key field value [field value ...].
func HSet(key string, fieldValues ...any) Cmd {
	return Cmd{Name: "HSET", Keys: []string{key}, Args: fieldValues}
}

// Del is DEL key [key ...]; deleting an absent key is not an error.
func Del(keys ...string) Cmd {
	return Cmd{Name: "DEL", Keys: keys}
}

// Exec runs cmds as one write fenced by token on scope; it is ExecSeq with
// no sequence.
func Exec(ctx context.Context, rdb redis.Scripter, scope string, token uint64, cmds ...Cmd) ([]any, error) {
	return ExecSeq(ctx, rdb, scope, token, 0, cmds...)
}

// ExecSeq runs cmds as one write fenced by (token, seq) on scope, in one
// script run by Redis atomically: if (token, seq) passes scope's mark (see
// fence.Mark.Admits), it runs the commands and advances the mark, and
// returns the commands' replies in order. A stale write returns a
// *fence.StaleError and runs nothing; a command that fails returns a
// *CommandError and leaves the keys and the mark as they were. With no cmds
// it only advances the mark, as Advance.
func ExecSeq(ctx context.Context, rdb redis.Scripter, scope string, token, seq uint64, cmds ...Cmd) ([]any, error) {
	keys, args, err := encode(scope, token, seq, cmds)
	if err != nil {
		return nil, err
	}
	res, err := script.Run(ctx, rdb, keys, args...).Slice()
	if err != nil {
		return nil, scriptError(scope, cmds, err)
	}
	return decode(scope, token, seq, res)
}

// Advance moves scope's mark to (token, seq) if that passes it, and
// otherwise returns a *fence.StaleError.
func Advance(ctx context.Context, rdb redis.Scripter, scope string, token, seq uint64) error {
	_, err := ExecSeq(ctx, rdb, scope, token, seq)
	return err
}

// MarkReader reads a hash's fields; *redis.Client and *redis.ClusterClient
// are one.
type MarkReader interface {
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
}

// HighWater returns scope's mark, the zero Mark if it has none.
func HighWater(ctx context.Context, rdb MarkReader, scope string) (fence.Mark, error) {
	vals, err := rdb.HMGet(ctx, MarkKey(scope), "token", "seq").Result()
	if err != nil {
		return fence.Mark{}, fmt.Errorf("redisfence: high water %q: %w", scope, err)
	}
	if vals[0] == nil && vals[1] == nil {
		return fence.Mark{}, nil
	}
	t, okT := parseStored(vals[0])
	s, okS := parseStored(vals[1])
	if !okT || !okS || t == 0 {
		return fence.Mark{}, fmt.Errorf("%w: %s = %v", ErrCorruptMark, MarkKey(scope), vals)
	}
	return fence.Mark{Token: t, Seq: s}, nil
}

// encode checks the call and lays it out as fence.lua reads it.
func encode(scope string, token, seq uint64, cmds []Cmd) ([]string, []any, error) {
	switch {
	case scope == "":
		return nil, nil, fence.ErrEmptyKey
	case token == 0:
		return nil, nil, fmt.Errorf("%w: token 0", fence.ErrMissingToken)
	}
	keys := []string{MarkKey(scope)}
	args := []any{strconv.FormatUint(token, 10), strconv.FormatUint(seq, 10), len(cmds)}
	for i, c := range cmds {
		if c.Name == "" || len(c.Keys) == 0 {
			return nil, nil, fmt.Errorf("%w: command %d (%q) needs a name and at least one key", ErrBadCommand, i, c.Name)
		}
		for _, k := range c.Keys {
			if k == "" || strings.HasPrefix(k, MarkPrefix) {
				return nil, nil, fmt.Errorf("%w: command %d (%s) names key %q", ErrBadCommand, i, c.Name, k)
			}
		}
		keys = append(keys, c.Keys...)
		args = append(args, c.Name, len(c.Keys), len(c.Args))
		args = append(args, c.Args...)
	}
	return keys, args, nil
}

// decode reads the script's answer: {1, replies} or {0, token, seq}.
func decode(scope string, token, seq uint64, res []any) ([]any, error) {
	if len(res) == 2 && res[0] == int64(1) {
		replies, ok := res[1].([]any)
		if ok {
			return replies, nil
		}
	}
	if len(res) == 3 && res[0] == int64(0) {
		ht, okT := parseStored(res[1])
		hs, okS := parseStored(res[2])
		if okT && okS {
			return nil, &fence.StaleError{Key: scope, Token: token, Seq: seq, HighWater: ht, HighSeq: hs}
		}
	}
	return nil, fmt.Errorf("redisfence: unexpected answer from the fence script: %v", res)
}

// scriptError turns the script's coded errors back into this package's.
func scriptError(scope string, cmds []Cmd, err error) error {
	code, rest, _ := strings.Cut(err.Error(), " ")
	switch code {
	case "FENCE_MISSING_TOKEN":
		return fmt.Errorf("%w: %s", fence.ErrMissingToken, rest)
	case "FENCE_MALFORMED_SEQUENCE":
		return fmt.Errorf("%w: %s", fence.ErrMalformedSequence, rest)
	case "FENCE_CORRUPT_MARK":
		return fmt.Errorf("%w: %s", ErrCorruptMark, rest)
	case "FENCE_BAD_REQUEST":
		return fmt.Errorf("%w: %s", ErrBadCommand, rest)
	case "FENCE_COMMAND_FAILED":
		n, msg, _ := strings.Cut(rest, " ")
		if i, perr := strconv.Atoi(n); perr == nil && i >= 1 && i <= len(cmds) {
			return &CommandError{Index: i - 1, Name: cmds[i-1].Name, Err: msg}
		}
	}
	return fmt.Errorf("redisfence: write on %q: %w", scope, err)
}

// parseStored parses a mark field as the script stores it: a canonical
// decimal, with 0 allowed (a seq of 0 means none).
func parseStored(v any) (uint64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	n, err := fence.ParseToken(s)
	return n, err == nil
}
