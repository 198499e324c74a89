package workload

import "golang.org/x/sys/unix"

// Now returns CLOCK_MONOTONIC in nanoseconds: one clock for the harness and
// every client process, as checker.Op.Call and Return require.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
