// Package verify is the exact reconciliation of a range of input against
// the output topic and the dead-letter topic: `flakestream verify`.
//
// A [Ledger] is fed the input range and every copy found in the output and
// the DLQ, matched by the flakestream-source header, and its [Report]
// counts each input record as numbered, passed through, dead-lettered or
// lost, and each fault: a copy beyond the first (duplicated), an order
// with two numbers (renumbered), a number on two orders, a copy naming no
// input. Its memory is fixed by the range, about 9.4 bytes an input offset.
// [Run] reads the topics from a cluster, read_committed, and fills a
// ledger; it only reads, and commits nothing. A [Window] is a ledger for
// input that does not end (`flakestream demo --serve`): it counts each
// record's fate as it settles and forgets it.
//
// The fault suite's accounting (test/accounting) and the demo count with
// the same Ledger, and the suite runs the command on every row, so the
// tests, the demo and the product mean one thing by "lost". What this package does not hold: the checks
// only a test that wrote the inputs can make (every output byte as
// promised, each partition's order), and the audit's live detection of a
// renumbered order within a window (package audit).
package verify
