// Package kfakerepro reproduces two consumer-group bugs of franz-go's
// in-memory broker, kfake, for the upstream report in REPORT.md: a member
// whose connection dies while its JoinGroup waits is never given a session
// timer, so nothing expires it and its partitions stay with it; and once
// the leader is gone, every member answered at the end of a join is told
// that it leads. The tests hold no code of flakestream's; they run only
// with FLAKESTREAM_KFAKE_REPRO=1, and fail while kfake has the bugs.
package kfakerepro
