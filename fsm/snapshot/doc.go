// Package snapshot is fencer's snapshot format: a header line, then one
// typed record per line (fsm/entry's records), decoded into an Image and
// checked before anything trusts it, plus the epoch rules a restore from a
// backup follows. fsm writes its state in this format and restores it from
// an Image; cluster's backup, restore and recovery read the same files.
package snapshot
