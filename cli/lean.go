package cli

// A lean build (`go build -tags lean`, what `make build` puts in bin/runtimectl) leaves the
// Kubernetes backend out: client-go's package init (its API scheme above all) is two thirds
// of the process's start, paid by every command that never talks to a cluster. Whatever needs
// the cluster runs FullBinary, the same CLI with Kubernetes, found next to the executable or
// on PATH, with the same arguments and environment, in place of the lean process
// (kube_lean.go). A build without the tag (`go build`, `go install`) is the whole CLI.

// FullBinary is the name of the build with the Kubernetes backend.
const FullBinary = "runtimectl-kube"
