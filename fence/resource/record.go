package resource

import (
	"encoding/binary"
	"errors"

	"github.com/fencer-io/fencer/fence"
)

// A record is the stored form of a value: the (token, seq) of the write that
// stored it, big-endian, then the value. Keeping the token with the value is
// what lets GET say which grant wrote what a reader sees.
const recordHeaderLen = 16

// errCorruptRecord is a stored value too short to hold its mark.
var errCorruptRecord = errors.New("resource: corrupt stored record")

func encodeRecord(m fence.Mark, value []byte) []byte {
	b := make([]byte, recordHeaderLen, recordHeaderLen+len(value))
	binary.BigEndian.PutUint64(b[:8], m.Token)
	binary.BigEndian.PutUint64(b[8:16], m.Seq)
	return append(b, value...)
}

func decodeRecord(b []byte) (fence.Mark, []byte, error) {
	if len(b) < recordHeaderLen {
		return fence.Mark{}, nil, errCorruptRecord
	}
	m := fence.Mark{Token: binary.BigEndian.Uint64(b[:8]), Seq: binary.BigEndian.Uint64(b[8:16])}
	return m, b[recordHeaderLen:], nil
}
