package checker

import (
	"fmt"
	"strings"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// MemberHashes finds members whose state machines diverged: after the run
// every member has applied the same log, so every state hash must be equal.
func MemberHashes(h history.History) []Violation {
	byHash := map[string][]string{}
	for _, m := range sortedKeys(h.MemberHashes) {
		byHash[h.MemberHashes[m]] = append(byHash[h.MemberHashes[m]], m)
	}
	if len(byHash) <= 1 {
		return nil
	}
	var groups []string
	for _, hash := range sortedKeys(byHash) {
		groups = append(groups, fmt.Sprintf("%s: %s", hash, strings.Join(byHash[hash], ", ")))
	}
	return []Violation{{
		Message: fmt.Sprintf("members hold %d different states: %s", len(byHash), strings.Join(groups, "; ")),
	}}
}
