package lease

import "time"

// Clock is the leader's source of time for lease deadlines. It is injected so
// that lease tests advance time by hand instead of sleeping. Only the leader
// reads it, and never to make a decision that replicas must agree on.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by Clock.AfterFunc. It is an alias of the
// interface literal so that a clock can implement Clock without importing
// this package (coord/internal/fakeclock, which these tests use).
type Timer = interface {
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RealClock is the wall clock (monotonic readings).
var RealClock Clock = realClock{}
