// Package entry is what fsm writes down: the commands of its log entries,
// with their type bytes, their JSON and binary forms and the log formats that
// decide which form a leader may write for the members it has; and the
// records its state is made of (grants, fenced keys, members, lock-delays,
// permits) with the token that orders them.
//
// It knows nothing of the state: fsm decodes each committed entry here and
// applies the command with the one apply function it keeps per type. Adding
// a command is a type byte, a struct with a Type method and a row of the
// commands table here, and an apply function in fsm (fsm/DESIGN.md,
// "Entries"). fsm/snapshot writes the records in a snapshot.
package entry
