package checker

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencer-io/fencer/test/chaos/checker/model"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// linearization is one porcupine run, kept so that a failure can be drawn.
type linearization struct {
	name   string
	model  porcupine.Model
	result porcupine.CheckResult
	info   porcupine.LinearizationInfo
}

// checkLinearizable runs model over the ops of h that keep selects and turns
// the result into a verdict.
func checkLinearizable(name string, model porcupine.Model, h history.History, keep func(history.OpKind) bool, timeout time.Duration) (Verdict, *linearization) {
	ops, pruned := operations(h, keep)
	if len(ops) == 0 {
		return Verdict{Name: name, Status: Skipped, Note: "no operations"}, nil
	}
	var note string
	if pruned > 0 {
		note = fmt.Sprintf("%d indeterminate ops that nothing observed were left out", pruned)
	}
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	info.AddAnnotations(eventAnnotations(h.Events))
	run := &linearization{name: name, model: model, result: result, info: info}
	switch result {
	case porcupine.Ok:
		return Verdict{Name: name, Status: Pass, Note: note}, run
	case porcupine.Unknown:
		return Verdict{Name: name, Status: Inconclusive,
			Note: fmt.Sprintf("search stopped after %v without finding a violation", timeout)}, run
	}
	return Verdict{Name: name, Status: Fail, Note: note, Violations: stuckPoints(model, ops, info)}, run
}

// operations converts the selected ops for porcupine, with the window each
// must take effect in (see plan), and counts the ops left out. Lock ops are
// wrapped in a model.LockInput.
func operations(h history.History, keep func(history.OpKind) bool) (ops []porcupine.Operation, pruned int) {
	window, unseen := plan(h)
	for i, op := range h.Ops {
		if !keep(op.Kind) {
			continue
		}
		if window[i] < 0 {
			pruned++
			continue
		}
		var input any = op
		if op.Kind.OnLock() {
			input = model.LockInput{Op: op, Unseen: unseen[i]}
		}
		ops = append(ops, porcupine.Operation{
			ClientId: op.Client,
			Input:    input,
			Call:     op.Call,
			Return:   window[i],
			Metadata: i,
		})
	}
	return ops, pruned
}

// stuckPoints explains each partition that has no linearization: the longest
// prefix porcupine could order, the state it leaves, and the operations that
// could come next, none of which the model accepts there.
func stuckPoints(m porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) []Violation {
	parts := model.PartitionByTarget(ops)
	partials := info.PartialLinearizations()
	var out []Violation
	for p, part := range parts {
		if p >= len(partials) {
			break
		}
		var longest []int
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		state := m.Init()
		done := make([]bool, len(part))
		for _, id := range longest {
			_, state = m.Step(state, part[id].Input, part[id].Output)
			done[id] = true
		}
		// An op can come next iff no other pending op returned before
		// it was called.
		earliestReturn := int64(-1)
		for id, op := range part {
			if !done[id] && (earliestReturn < 0 || op.Return < earliestReturn) {
				earliestReturn = op.Return
			}
		}
		var evidence []history.Op
		if len(longest) > 0 {
			evidence = append(evidence, model.OpOf(part[longest[len(longest)-1]].Input))
		}
		for id, op := range part {
			if !done[id] && op.Call <= earliestReturn {
				evidence = append(evidence, model.OpOf(op.Input))
			}
		}
		target := model.OpOf(part[0].Input).Target
		msg := fmt.Sprintf("%s: not linearizable; after %d of %d ops the state is %s, and no pending op can come next",
			target, len(longest), len(part), m.DescribeState(state))
		if len(longest) > 0 {
			msg += " (first op listed is the last one ordered)"
		}
		out = append(out, Violation{Message: msg, Ops: evidence})
	}
	return out
}

func eventAnnotations(events []history.Event) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, e := range events {
		color := "#dddddd"
		if e.Kind.IsEpoch() {
			color = "#f7c6a3"
		}
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           e.Time,
			Description:     string(e.Kind),
			Details:         e.Description,
			BackgroundColor: color,
		})
	}
	return out
}

func onLock(k history.OpKind) bool { return k.OnLock() }
func onKey(k history.OpKind) bool  { return k == history.Put || k == history.Get }
