package fsm

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every log entry. Types are only ever
// appended; a number, once used, keeps its meaning forever.
type CommandType uint8

const (
	CmdAcquire      CommandType = 1
	CmdRelease      CommandType = 2
	CmdExpire       CommandType = 3
	CmdPut          CommandType = 4
	CmdSetMember    CommandType = 5
	CmdRemoveMember CommandType = 6
	CmdBumpEpoch    CommandType = 7
	CmdSetClusterID CommandType = 8
)

func (t CommandType) String() string {
	switch t {
	case CmdAcquire:
		return "acquire"
	case CmdRelease:
		return "release"
	case CmdExpire:
		return "expire"
	case CmdPut:
		return "put"
	case CmdSetMember:
		return "set-member"
	case CmdRemoveMember:
		return "remove-member"
	case CmdBumpEpoch:
		return "bump-epoch"
	case CmdSetClusterID:
		return "set-cluster-id"
	case CmdAcquireBinary:
		return "acquire(binary)"
	case CmdReleaseBinary:
		return "release(binary)"
	case CmdExpireBinary:
		return "expire(binary)"
	case CmdPutBinary:
		return "put(binary)"
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Command is one FSM operation. Everything the FSM needs is inside it: the
// leader chooses lease secrets and timestamps before proposing.
type Command interface {
	Type() CommandType
}

// Acquire grants a free lock. Its token is the log index of the entry that
// carries it (with the epoch in the high bits).
type Acquire struct {
	Lock      string `json:"lock"`
	Holder    string `json:"holder"`
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	RequestID string `json:"request_id,omitempty"`
	// NowMillis is the proposing leader's wall clock. It is recorded for
	// operators and never used in a decision.
	NowMillis int64 `json:"now_ms,omitempty"`
}

// Release frees a lock held under Token and Lease. When Next is set and the
// release succeeds, the lock is handed to Next in the same entry, so a queued
// waiter gets it with no gap in which anybody else could.
type Release struct {
	Lock  string   `json:"lock"`
	Token uint64   `json:"token"`
	Lease string   `json:"lease"`
	Next  *Acquire `json:"next,omitempty"`
}

// Expire frees a lock whose lease ran out on the leader. It does nothing when
// Token is no longer the lock's current token.
type Expire struct {
	Lock  string   `json:"lock"`
	Token uint64   `json:"token"`
	Next  *Acquire `json:"next,omitempty"`
}

// Put stores a value under a fenced key if Token is greater than the key's
// last token, and, when Lock is set, only while Token is that lock's current
// grant.
type Put struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
	Token uint64 `json:"token"`
	Lock  string `json:"lock,omitempty"`
}

// SetMember records a member's addresses so that any node can reach any
// other node's HTTP API (to forward to the leader).
type SetMember struct {
	Member
}

// RemoveMember forgets a member's addresses.
type RemoveMember struct {
	ID string `json:"id"`
}

// BumpEpoch moves every future token above every token of the previous epoch.
// It is proposed after a restore or a forced recovery, when tokens the old
// cluster issued may be unknown to this one.
type BumpEpoch struct {
	Reason string `json:"reason"`
}

// SetClusterID names the cluster once, when its first leader takes office.
// Later ones are ignored: a cluster's id never changes.
type SetClusterID struct {
	ID string `json:"id"`
}

func (Acquire) Type() CommandType      { return CmdAcquire }
func (Release) Type() CommandType      { return CmdRelease }
func (Expire) Type() CommandType       { return CmdExpire }
func (Put) Type() CommandType          { return CmdPut }
func (SetMember) Type() CommandType    { return CmdSetMember }
func (RemoveMember) Type() CommandType { return CmdRemoveMember }
func (BumpEpoch) Type() CommandType    { return CmdBumpEpoch }
func (SetClusterID) Type() CommandType { return CmdSetClusterID }

// Encode returns the log entry for cmd: its type byte, then its payload
// (binary for the commands of a lock cycle, see binary.go; JSON for the
// others).
func Encode(cmd Command) ([]byte, error) { return EncodeFormat(cmd, LogFormat) }

func encodeJSON(cmd Command) ([]byte, error) {
	payload, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.Type(), err)
	}
	buf := make([]byte, 0, 1+len(payload))
	buf = append(buf, byte(cmd.Type()))
	return append(buf, payload...), nil
}

// UnknownCommandError is returned for a type byte this build does not know.
// It means the entry was written by a newer fencer: skipping it would let this
// replica diverge from the others, so the FSM refuses to go on (see Apply).
type UnknownCommandError struct{ Type CommandType }

func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("unknown command type %d: this node runs an older fencer than the entry's writer; upgrade it", uint8(e.Type))
}

// Decode parses a log entry. An entry whose type is known but whose payload is
// malformed yields ErrMalformedCommand; an unknown type yields
// *UnknownCommandError.
func Decode(entry []byte) (Command, error) {
	if len(entry) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrMalformedCommand)
	}
	var cmd Command
	switch t := CommandType(entry[0]); t {
	case CmdAcquireBinary, CmdReleaseBinary, CmdExpireBinary, CmdPutBinary:
		return decodeBinary(t, entry[1:])
	case CmdAcquire:
		cmd = &Acquire{}
	case CmdRelease:
		cmd = &Release{}
	case CmdExpire:
		cmd = &Expire{}
	case CmdPut:
		cmd = &Put{}
	case CmdSetMember:
		cmd = &SetMember{}
	case CmdRemoveMember:
		cmd = &RemoveMember{}
	case CmdBumpEpoch:
		cmd = &BumpEpoch{}
	case CmdSetClusterID:
		cmd = &SetClusterID{}
	default:
		return nil, &UnknownCommandError{Type: t}
	}
	if err := json.Unmarshal(entry[1:], cmd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, CommandType(entry[0]), err)
	}
	return cmd, nil
}
