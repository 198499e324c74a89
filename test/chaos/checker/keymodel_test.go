package checker

import "testing"

// Each case breaks one rule of the fenced key model.
func TestKeyModelRejects(t *testing.T) {
	runCases(t, CheckKeys, Fail, []historyCase{
		{name: "put ok with an older token", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(1, "k", "b", 3, OK, 20, 30),
		}, evidence: `put(k, "b", t3) -> ok`},
		{name: "put ok replaying the same token", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(0, "k", "b", 5, OK, 20, 30),
		}},
		{name: "put ok replaying a sequence", ops: []Op{
			putSeq(0, "k", "a", 5, 2, OK, 0, 10),
			putSeq(0, "k", "b", 5, 1, OK, 20, 30),
		}},
		{name: "stale_token for a newer token", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(1, "k", "b", 7, StaleToken, 20, 30),
		}},
		{name: "stale_token on an unwritten key", ops: []Op{
			put(1, "k", "b", 7, StaleToken, 0, 10),
		}},
		{name: "get returns the wrong value", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			get(1, "k", "b", 5, 20, 30),
		}, evidence: "get(k)"},
		{name: "get returns the wrong token", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			get(1, "k", "a", 4, 20, 30),
		}},
		{name: "get finds a value nobody wrote", ops: []Op{
			get(1, "k", "a", 5, 0, 10),
		}},
		{name: "get misses an acknowledged put", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			getMissing(1, "k", 20, 30),
		}},
		{name: "get returns a refused put", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(1, "k", "b", 3, StaleToken, 20, 30),
			get(1, "k", "b", 3, 40, 50),
		}},
		{name: "get returns a put refused for not holding the lock", ops: []Op{
			put(1, "k", "b", 3, NotLockHolder, 0, 10),
			get(1, "k", "b", 3, 20, 30),
		}},
		{name: "an answered error cannot take effect after its answer", ops: []Op{
			{Kind: Put, Target: "k", Client: 0, Value: "a", Token: 5, Outcome: OtherError, Error: "500", Call: 0, Return: 10},
			getMissing(1, "k", 20, 30),
			get(1, "k", "a", 5, 40, 50),
		}},
		{name: "a value goes back after the newer write was read", ops: []Op{
			put(0, "k", "a", 5, Unknown, 0, 10),
			put(1, "k", "b", 7, OK, 0, 10),
			get(2, "k", "b", 7, 20, 30),
			get(2, "k", "a", 5, 40, 50),
		}},
	})
}

// Each case is a history a correct fence could produce.
func TestKeyModelAccepts(t *testing.T) {
	runCases(t, CheckKeys, Pass, []historyCase{
		{name: "writes under increasing tokens", ops: []Op{
			getMissing(1, "k", 0, 5),
			put(0, "k", "a", 5, OK, 10, 20),
			get(1, "k", "a", 5, 30, 40),
			put(0, "k", "b", 7, OK, 50, 60),
			put(1, "k", "c", 6, StaleToken, 70, 80),
			put(1, "k", "d", 7, StaleToken, 70, 80),
			get(1, "k", "b", 7, 90, 100),
		}},
		{name: "several writes under one grant, numbered", ops: []Op{
			putSeq(0, "k", "a", 5, 1, OK, 0, 10),
			putSeq(0, "k", "b", 5, 2, OK, 20, 30),
			putSeq(1, "k", "c", 5, 2, StaleToken, 40, 50),
			{Kind: Get, Target: "k", Client: 1, Found: true, Value: "b", Token: 5, Seq: 2, Outcome: OK, Call: 60, Return: 70},
		}},
		{name: "concurrent puts linearize by the fence", ops: []Op{
			put(0, "k", "a", 7, OK, 0, 30),
			put(1, "k", "b", 5, StaleToken, 10, 20),
			get(2, "k", "a", 7, 40, 50),
		}},
		{name: "not_lock_holder changes nothing", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(1, "k", "b", 9, NotLockHolder, 20, 30),
			get(2, "k", "a", 5, 40, 50),
		}},
		{name: "an unknown put that did not happen", ops: []Op{
			put(0, "k", "a", 5, Unknown, 0, 10),
			getMissing(1, "k", 20, 30),
			put(1, "k", "b", 6, OK, 40, 50),
			get(1, "k", "b", 6, 60, 70),
		}},
		{name: "an unknown put that lands after the client gave up", ops: []Op{
			put(0, "k", "a", 5, Unknown, 0, 10),
			getMissing(1, "k", 20, 30),
			get(1, "k", "a", 5, 40, 50),
		}},
		{name: "an unknown put beaten by a newer one", ops: []Op{
			put(0, "k", "a", 5, Unknown, 0, 10),
			put(1, "k", "b", 7, OK, 20, 30),
			get(1, "k", "b", 7, 40, 50),
		}},
		{name: "keys are independent", ops: []Op{
			put(0, "k", "a", 5, OK, 0, 10),
			put(1, "j", "b", 3, OK, 20, 30),
			get(1, "j", "b", 3, 40, 50),
		}},
	})
}
