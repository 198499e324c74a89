package test

import (
	"os"
	"testing"
)

// TestMain doubles as the election test's writer: a campaigner's command
// is this test binary run again with electionWriterEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(electionWriterEnv) != "" {
		os.Exit(runElectionWriter())
	}
	os.Exit(m.Run())
}
