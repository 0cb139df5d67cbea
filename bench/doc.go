// Package bench holds what measures flakestream from outside, apart from the
// product: the peer programs of scripts/peer-bench (peer/copyloop, franz-go's
// transactional copy loop; peer/measure, the side-by-side driver;
// peer/kstreams, the Kafka Streams peer, a Maven project), verifybench (verify
// on a large range), and the run records under results/. It is a module of
// its own so that its tools stay out of the product's go.mod; CI builds and
// vets it (make lint-bench).
package bench
