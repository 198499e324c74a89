package model

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// keyState is one fenced key: its value and the stamp of the write that set
// it. Written is false until the first accepted put.
type keyState struct {
	Written bool
	Value   string
	Last    history.Stamp
}

func (s keyState) String() string {
	if !s.Written {
		return "unwritten"
	}
	return fmt.Sprintf("%q %s", s.Value, s.Last)
}

// stepKey is the sequential specification of one fenced key: a put is
// accepted iff the fence admits its stamp, and a get returns the last
// accepted put.
func stepKey(s keyState, op history.Op) []keyState {
	applied := keyState{Written: true, Value: op.Value, Last: op.Stamp()}
	switch op.Kind {
	case history.Put:
		switch op.Outcome {
		case history.OK:
			if !s.Last.Admits(op.Stamp()) {
				return nil
			}
			return []keyState{applied}
		case history.StaleToken:
			if s.Last.Admits(op.Stamp()) {
				return nil
			}
			return []keyState{s}
		case history.NotLockHolder, history.Refused:
			// Definite refusals that say nothing of the mark: the put did
			// not take effect, whatever the state.
			return []keyState{s}
		case history.Unknown, history.OtherError:
			if s.Last.Admits(op.Stamp()) {
				return []keyState{s, applied}
			}
			return []keyState{s}
		}
		panic(fmt.Sprintf("checker: put outcome %q in the key model", op.Outcome))
	case history.Get:
		if op.Outcome != history.OK {
			return []keyState{s}
		}
		if op.Found != s.Written {
			return nil
		}
		if op.Found && (op.Value != s.Value || op.Stamp() != s.Last) {
			return nil
		}
		return []keyState{s}
	}
	panic(fmt.Sprintf("checker: %s op in the key model", op.Kind))
}

func hashKey(v any) uint64 {
	s := v.(keyState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%t|%d|%d|%s", s.Written, s.Last.Token, s.Last.Seq, s.Value)
	return h.Sum64()
}

// Key is the porcupine model of every fenced key, partitioned by key.
var Key = (&porcupine.NondeterministicModel{
	Partition: PartitionByTarget,
	Init:      func() []any { return []any{keyState{}} },
	Step: func(state, input, _ any) []any {
		return toAny(stepKey(state.(keyState), input.(history.Op)))
	},
	Hash:                      hashKey,
	DescribeOperation:         describeOp,
	DescribeState:             func(s any) string { return s.(keyState).String() },
	DescribeOperationMetadata: describeMetadata,
}).ToModel()
