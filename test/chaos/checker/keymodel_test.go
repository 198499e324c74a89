package checker

import (
	"testing"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// Each case breaks one rule of the fenced key model.
func TestKeyModelRejects(t *testing.T) {
	runCases(t, CheckKeys, Fail, []historyCase{
		{name: "put ok with an older token", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(1, "k", "b", 3, history.OK, 20, 30),
		}, evidence: `put(k, "b", t3) -> ok`},
		{name: "put ok replaying the same token", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(0, "k", "b", 5, history.OK, 20, 30),
		}},
		{name: "put ok replaying a sequence", ops: []history.Op{
			putSeq(0, "k", "a", 5, 2, history.OK, 0, 10),
			putSeq(0, "k", "b", 5, 1, history.OK, 20, 30),
		}},
		{name: "stale_token for a newer token", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(1, "k", "b", 7, history.StaleToken, 20, 30),
		}},
		{name: "stale_token on an unwritten key", ops: []history.Op{
			put(1, "k", "b", 7, history.StaleToken, 0, 10),
		}},
		{name: "get returns the wrong value", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			get(1, "k", "b", 5, 20, 30),
		}, evidence: "get(k)"},
		{name: "get returns the wrong token", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			get(1, "k", "a", 4, 20, 30),
		}},
		{name: "get finds a value nobody wrote", ops: []history.Op{
			get(1, "k", "a", 5, 0, 10),
		}},
		{name: "get misses an acknowledged put", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			getMissing(1, "k", 20, 30),
		}},
		{name: "get returns a refused put", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(1, "k", "b", 3, history.StaleToken, 20, 30),
			get(1, "k", "b", 3, 40, 50),
		}},
		{name: "get returns a put refused for not holding the lock", ops: []history.Op{
			put(1, "k", "b", 3, history.NotLockHolder, 0, 10),
			get(1, "k", "b", 3, 20, 30),
		}},
		{name: "an answered error cannot take effect after its answer", ops: []history.Op{
			{Kind: history.Put, Target: "k", Client: 0, Value: "a", Token: 5, Outcome: history.OtherError, Error: "500", Call: 0, Return: 10},
			getMissing(1, "k", 20, 30),
			get(1, "k", "a", 5, 40, 50),
		}},
		{name: "a refused put takes effect", ops: []history.Op{
			refused(0, "k", "a", 5, "unissued_token", 0, 10),
			get(1, "k", "a", 5, 20, 30),
		}, evidence: "get(k)"},
		{name: "a value goes back after the newer write was read", ops: []history.Op{
			put(0, "k", "a", 5, history.Unknown, 0, 10),
			put(1, "k", "b", 7, history.OK, 0, 10),
			get(2, "k", "b", 7, 20, 30),
			get(2, "k", "a", 5, 40, 50),
		}},
	})
}

// Each case is a history a correct fence could produce.
func TestKeyModelAccepts(t *testing.T) {
	runCases(t, CheckKeys, Pass, []historyCase{
		{name: "writes under increasing tokens", ops: []history.Op{
			getMissing(1, "k", 0, 5),
			put(0, "k", "a", 5, history.OK, 10, 20),
			get(1, "k", "a", 5, 30, 40),
			put(0, "k", "b", 7, history.OK, 50, 60),
			put(1, "k", "c", 6, history.StaleToken, 70, 80),
			put(1, "k", "d", 7, history.StaleToken, 70, 80),
			get(1, "k", "b", 7, 90, 100),
		}},
		{name: "several writes under one grant, numbered", ops: []history.Op{
			putSeq(0, "k", "a", 5, 1, history.OK, 0, 10),
			putSeq(0, "k", "b", 5, 2, history.OK, 20, 30),
			putSeq(1, "k", "c", 5, 2, history.StaleToken, 40, 50),
			{Kind: history.Get, Target: "k", Client: 1, Found: true, Value: "b", Token: 5, Seq: 2, Outcome: history.OK, Call: 60, Return: 70},
		}},
		{name: "concurrent puts linearize by the fence", ops: []history.Op{
			put(0, "k", "a", 7, history.OK, 0, 30),
			put(1, "k", "b", 5, history.StaleToken, 10, 20),
			get(2, "k", "a", 7, 40, 50),
		}},
		{name: "not_lock_holder changes nothing", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(1, "k", "b", 9, history.NotLockHolder, 20, 30),
			get(2, "k", "a", 5, 40, 50),
		}},
		// Only stale_token says the token is not above the mark: a newer
		// token refused for another reason is no contradiction.
		{name: "unissued_token says nothing of the mark", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			refused(1, "k", "b", 7, "unissued_token", 20, 30),
			get(2, "k", "a", 5, 40, 50),
		}},
		{name: "a refusal without a token says nothing of the mark", ops: []history.Op{
			refused(1, "k", "b", 0, "missing_token", 0, 10),
			put(0, "k", "a", 5, history.OK, 20, 30),
			refused(1, "k", "b", 0, "missing_token", 40, 50),
		}},
		{name: "an unknown put that did not happen", ops: []history.Op{
			put(0, "k", "a", 5, history.Unknown, 0, 10),
			getMissing(1, "k", 20, 30),
			put(1, "k", "b", 6, history.OK, 40, 50),
			get(1, "k", "b", 6, 60, 70),
		}},
		{name: "an unknown put that lands after the client gave up", ops: []history.Op{
			put(0, "k", "a", 5, history.Unknown, 0, 10),
			getMissing(1, "k", 20, 30),
			get(1, "k", "a", 5, 40, 50),
		}},
		{name: "an unknown put beaten by a newer one", ops: []history.Op{
			put(0, "k", "a", 5, history.Unknown, 0, 10),
			put(1, "k", "b", 7, history.OK, 20, 30),
			get(1, "k", "b", 7, 40, 50),
		}},
		{name: "keys are independent", ops: []history.Op{
			put(0, "k", "a", 5, history.OK, 0, 10),
			put(1, "j", "b", 3, history.OK, 20, 30),
			get(1, "j", "b", 3, 40, 50),
		}},
	})
}
