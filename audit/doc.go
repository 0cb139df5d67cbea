// Package audit is the audit side consumer: it reads the numbered topics,
// decodes every number into a codec.AuditRecord, flags anomalies (a
// detector with a bounded duplicate window, caught up on every newly
// assigned partition), writes the audit records to the audit topic (a step
// of the exactly-once loop) or to stdout (at least once), and serves the
// live page and its metrics (Handlers).
//
// What it does not hold: numbering (pipeline), the loop, its configuration
// and the errors it shares with the worker (eos), the layouts it decodes
// with (idgen), and the exact reconciliation of a range of input against the
// output (verify): the audit flags what it sees within its windows, verify
// counts every order of a range. It has no flags: the command line is
// internal/cli.
package audit
