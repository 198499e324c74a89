package model

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// OpOf returns the Op inside a porcupine input.
func OpOf(input any) history.Op {
	if in, ok := input.(LockInput); ok {
		return in.Op
	}
	return input.(history.Op)
}

// PartitionByTarget splits a history into one partition per lock or key, in
// order of first appearance so that partition indexes are reproducible.
func PartitionByTarget(ops []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range ops {
		target := OpOf(op.Input).Target
		i, ok := index[target]
		if !ok {
			i = len(parts)
			index[target] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeOp(input, _ any) string { return OpOf(input).String() }

func describeMetadata(m any) string {
	if i, ok := m.(int); ok {
		return fmt.Sprintf("op #%d in history.json", i)
	}
	return ""
}

func toAny[S any](states []S) []any {
	out := make([]any, len(states))
	for i, s := range states {
		out[i] = s
	}
	return out
}
