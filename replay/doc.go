// Package replay runs bounded, resumable replays: the worker over an offset
// range of one input topic (from a Bound to a Bound: a partition's start or
// end, a time, or explicit offsets), in a consumer group and transactional
// ID of its own, ending once every partition has reached its bound. The
// bounds it resolved are kept in Redis, so running the same replay again
// resumes where it stopped instead of starting over.
//
// What it does not hold: the worker itself (pipeline; Config.Worker passes
// its options through), and checking what a replay wrote (verify). It has
// no flags: the command line is internal/cli.
package replay
