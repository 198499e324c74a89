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
// WithBrokenFence builds the same server with a known fencing bug (missing
// token read as 0, or high-water marks kept only in memory). Those servers
// exist to prove a chaos test can detect the corruption the fence prevents;
// they are not for use outside tests.
package resource
