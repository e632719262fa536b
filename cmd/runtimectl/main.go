// Command runtimectl runs LLM-written code in long-lived, stateful Docker sessions.
// See README.md, or `runtimectl --help`.
package main

import (
	"os"

	"github.com/runtimectl/runtimectl/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
