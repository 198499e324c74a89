// Command fencer is the fencer lock service: server, local dev cluster, and
// the command-line client. root.go lists every command; they live in
// internal/opscmd (running and operating a cluster) and internal/clientcmd
// (using its primitives), over what internal/cli gives them all.
package main

import (
	"io"
	"os"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
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
	cli.ReportError(stderr, err, cli.WantsJSON(cmd, args))
	return cli.ExitCode(err)
}
