package fence

import (
	"encoding/binary"
	"fmt"
)

// Mark is the high-water mark of one fence scope: the last accepted token and,
// when the writer numbered its writes, the sequence of that write.
type Mark struct {
	Token uint64 `json:"token"`
	Seq   uint64 `json:"seq"`
}

// Admits reports whether a write carrying token and seq may pass a fence
// whose high-water mark is m. seq is 0 when the write carries no sequence.
//
// A write is admitted iff token > m.Token, or token == m.Token and
// seq > m.Seq with seq >= 1. So without a sequence an equal token is always a
// replay and refused; with one, a single grant may write several times as
// long as it numbers its writes 1, 2, 3, ... and a replay of any of them is
// still refused. Token 0 is never admitted.
func (m Mark) Admits(token, seq uint64) bool {
	switch {
	case token == 0:
		return false
	case token > m.Token:
		return true
	case token == m.Token:
		return seq != 0 && seq > m.Seq
	}
	return false
}

// markLen is the stored size of a Mark: token then seq, big-endian.
const markLen = 16

func (m Mark) encode() []byte {
	b := make([]byte, markLen)
	binary.BigEndian.PutUint64(b[:8], m.Token)
	binary.BigEndian.PutUint64(b[8:], m.Seq)
	return b
}

// decodeMark decodes a stored mark. A mark of the wrong size is corruption,
// and guessing would let an old token back in, so it is an error.
func decodeMark(b []byte) (Mark, error) {
	if b == nil {
		return Mark{}, nil
	}
	if len(b) != markLen {
		return Mark{}, fmt.Errorf("fence: corrupt high-water mark: %d bytes", len(b))
	}
	return Mark{
		Token: binary.BigEndian.Uint64(b[:8]),
		Seq:   binary.BigEndian.Uint64(b[8:]),
	}, nil
}
