package idgen

import (
	"syscall"
	"time"
)

// shortSleep sleeps for d, a fraction of a millisecond to wait for the next
// millisecond boundary, with the kernel's high-resolution timer. The Go
// runtime's timers wake sub-millisecond sleeps up to a millisecond late on
// some machines (a median of 0.58 ms measured on this project's CI VM,
// against 0.075 ms for nanosleep), which would skip whole milliseconds of
// capacity. It blocks one OS thread for at most d; it does not spin.
func shortSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
