//go:build !linux

package idgen

import "time"

// shortSleep sleeps for d, a fraction of a millisecond; see sleep_linux.go.
func shortSleep(d time.Duration) { time.Sleep(d) }
