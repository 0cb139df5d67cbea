// Package helm holds the tests of the flakestream Helm chart (the
// flakestream directory beside this file): lint, render with helm's own
// packages, decode every object strictly into its Kubernetes, Prometheus
// Operator or KEDA type, and check what the deployment depends on. It is a
// module of its own so that helm's and Kubernetes' dependencies never reach
// the product's go.mod.
package helm
