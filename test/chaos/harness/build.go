package harness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinEnv names an environment variable holding a prebuilt fencer binary to
// use instead of building one (make chaos can pass bin/fencer).
const BinEnv = "FENCER_BIN"

// BuildFencer returns the path of a fencer binary built from the module
// this package belongs to, into dir; or the binary named by BinEnv.
func BuildFencer(dir string) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s: %w", BinEnv, err)
		}
		return abs, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "fencer")
	// The diskfault tag lets the nemesis stall or fail a node's log store
	// (test/diskfault); a binary from BinEnv may lack it, and then the
	// disk faults do not complete.
	cmd := exec.Command(goTool(), "build", "-tags", "diskfault", "-o", out, "./cmd/fencer")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build -tags diskfault ./cmd/fencer: %w: %s", err, stderr.String())
	}
	return out, nil
}

// moduleRoot is the directory of the go.mod governing the working
// directory (a test runs in its package's directory).
func moduleRoot() (string, error) {
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// goTool prefers the go command of the toolchain that built this binary.
func goTool() string {
	if goroot := os.Getenv("GOROOT"); goroot != "" {
		if p := filepath.Join(goroot, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
