// Package resource is an example storage server fenced by fencer's tokens:
// the smallest real resource that a chaos test can point stale writers at.
//
// It adds nothing to the fence package's rules; every PUT goes through
// fence.Middleware, so the token check, the value and the new high-water
// mark are one bbolt transaction, and a 200 is sent only after it commits.
// Each stored value keeps the token of the write that stored it, which GET
// returns in the Fencing-Token header, so a checker can tell which grant
// wrote what it reads.
//
// The chaos suite's negative control, the same server with a deliberate
// fencing bug, lives in test code (test/chaos/brokenfence), so that no build
// of fencer can serve it.
package resource
