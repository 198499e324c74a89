package chaos

import (
	"strings"
	"testing"

	"github.com/fencer-io/fencer/test/chaos/history"
)

func TestSummaryCountsRefusalsByCode(t *testing.T) {
	op := func(kind history.OpKind, out history.Outcome, code string) history.Op {
		return history.Op{Kind: kind, Target: "x", Outcome: out, Code: code}
	}
	r := &Result{History: history.History{Ops: []history.Op{
		op(history.Put, history.StaleToken, "stale_token"),
		op(history.Put, history.StaleToken, "stale_token"),
		op(history.Put, history.Unknown, "stale_token"), // retried after a lost answer
		op(history.Put, history.Refused, "unissued_token"),
		op(history.Acquire, history.LockHeld, "lock_held"),
		op(history.Acquire, history.Unknown, "no_leader"),
		op(history.Put, history.Unknown, "no_leader"),
		op(history.Put, history.OK, ""),
	}}}
	got := r.refusalCodes()
	for _, want := range []string{
		"  stale_token                 3: put 3 (1 on indeterminate ops)\n",
		"  no_leader                   2: acquire 1, put 1 (2 on indeterminate ops)\n",
		"  unissued_token              1: put 1\n",
		"  lock_held                   1: acquire 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("refusal counts lack %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "stale_token") > strings.Index(got, "no_leader") {
		t.Errorf("not most frequent first:\n%s", got)
	}
	if got := (&Result{}).refusalCodes(); got != "answers with an error code: none\n" {
		t.Errorf("no codes: %q", got)
	}
}
