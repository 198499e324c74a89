// Command fencer is the fencer lock service: server, local dev cluster, and
// the command-line client.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "fencer: "+oneLine(err))
		os.Exit(exitCode(err))
	}
}
