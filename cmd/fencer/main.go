// Command fencer is the fencer lock service: server, local dev cluster, and
// the command-line client.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit status. An error is
// printed to stderr as one line, or as a JSON object under -o json.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	reportError(stderr, err, wantsJSON(cmd, args))
	return exitCode(err)
}
