// Package entry is how fsm's commands are written into the Raft log: every
// command, its type byte, its JSON and binary forms, and the log formats that
// decide which form a leader may write for the members it has.
//
// It knows nothing of the state: fsm decodes each committed entry here and
// applies the command with the one apply function it keeps per type. Adding
// a command is a type byte, a struct with a Type method and a row of the
// commands table here, and an apply function in fsm (fsm/DESIGN.md, "Entries").
package entry
