//go:build diskfault

package opscmd

import (
	"os"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/test/diskfault"
)

// Only a fencer built with -tags diskfault (the chaos suite's) lets a
// harness stall or fail its log store, through the file named by
// $FENCER_DISK_FAULT_FILE.
func init() {
	testConfig = func(cfg *cluster.Config) {
		if path := os.Getenv(diskfault.ControlEnv); path != "" {
			cfg.WrapLogStore = diskfault.Controlled(path)
		}
	}
}
