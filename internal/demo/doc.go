// Package demo is `flakestream demo`: the whole job in one process on an
// embedded stack (kfake for Kafka, miniredis for Redis), then checked.
//
// Run numbers a bounded batch of orders, audits the output and accounts for
// every order; Serve keeps a steady order stream running with the audit's
// live page and both /metrics served, and accounts for every order when it
// stops. Both return one Summary. StartKafka, StartRedis and StartEmbedded
// start the embedded services, for the demo and for `flakestream bench`.
//
// It holds no flags and prints nothing but Serve's progress lines: the CLI
// (internal/cli) reads the flags and prints the Summary.
package demo
