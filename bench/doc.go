// Package bench measures runtimectl against the ways people run agent code in containers
// without it: a Jupyter kernel in the same image family, a stateless `docker exec python3 -c`,
// `docker run`, raw Docker exec streams and raw fsynced writes. Each pair is measured
// interleaved in one run, so that the machine's load falls on both sides alike.
//
// The driver is bench/cmd/benchrun (`make bench`); it prints a table and writes
// bench/results.json. The Go benchmarks in this package (BenchmarkExecRoundTrip and friends)
// measure the hot paths with `go test -bench`. README.md says what each figure means.
//
// Unlike the rest of the project, this package imports the Docker SDK directly: the baselines
// (raw exec streams, bare containers, memory statistics, the Jupyter image) must not go through
// runtimectl's own code. Everything it creates carries the label io.runtimectl.bench, or, for
// sessions, a name starting with "rtbench-", and is removed when the run ends; the comparison
// images it builds (runtimectl-bench/jupyter) are kept and reused.
package bench
