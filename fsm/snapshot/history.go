package snapshot

import (
	"errors"
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Void makes img the state that a restore or recovery installs at index,
// dropping every grant of cur, the state it replaces (img itself for a
// recovery): cur's held locks become img's voided grants, reported as
// events by every member that installs img (whatever each held before), as
// do cur's held permits, and cur's grant history carries over with them,
// every held grant ended as voided at index.
// img's own locks, requests, delays and permits are the caller's to clear.
func (img *Image) Void(cur *Image, index uint64) {
	voided := make([]entry.VoidedGrant, 0, len(cur.Locks)+len(cur.Permits))
	for _, l := range cur.Locks {
		voided = append(voided, entry.VoidedGrant{Lock: l.Name, Holder: l.Holder, Token: l.Token})
	}
	for _, l := range cur.Shared {
		voided = append(voided, entry.VoidedGrant{Lock: l.Name, Holder: l.Holder, Token: l.Token})
	}
	for _, p := range cur.Permits {
		voided = append(voided, entry.VoidedGrant{Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token})
	}
	grants := append([]entry.GrantRecord(nil), cur.Grants...)
	for i := range grants {
		if grants[i].Ended == "" {
			grants[i].Ended, grants[i].EndedIndex = entry.EndVoided, index
		}
	}
	img.Voided, img.Grants = voided, grants
	img.Header.RestoredAt = index
	img.Header.GrantHistory, img.Header.GrantsFrom, img.Header.GrantRing = cur.Header.GrantHistory, cur.Header.GrantsFrom, cur.Header.GrantRing
	img.Header.PermitsFrom = cur.Header.PermitsFrom
	img.Header.Voided, img.Header.VoidedPermits, img.Header.Grants = len(voided), len(cur.Permits), len(grants)
	img.Header.SharedGrants = sharedGrants(grants)
}

// checkGrants refuses a grant history no log could have written: grants out
// of token order, above the last token or with an unknown way; a ring
// longer than the records or than the settings allow; a permit's grant
// below the token from which permits are recorded, or a record of both a
// lock and a semaphore or of neither. (CheckHeldGrants checks them against
// the locks, which a restore does not collect here.)
//
// It is long because it is a list of independent checks, each a line or two.
func (img *Image) checkGrants() error {
	h := img.Header
	if h.GrantHistory == nil {
		if len(img.Grants) > 0 || h.GrantsFrom != 0 || h.GrantRing != 0 || h.PermitsFrom != 0 {
			return errors.New("grant records without grant history settings")
		}
		return nil
	}
	if err := h.GrantHistory.Validate(); err != nil {
		return err
	}
	if h.GrantRing > len(img.Grants) || h.GrantRing > h.GrantHistory.Global {
		return fmt.Errorf("grant ring of %d of %d grants, at most %d kept", h.GrantRing, len(img.Grants), h.GrantHistory.Global)
	}
	var last uint64
	for i, g := range img.Grants {
		if g.Token <= last || g.Token > h.LastToken || (g.Lock == "") == (g.Semaphore == "") {
			return fmt.Errorf("grant %d of lock %q (semaphore %q) out of order or above the last token %d", g.Token, g.Lock, g.Semaphore, h.LastToken)
		}
		if g.Semaphore != "" && (h.PermitsFrom == 0 || g.Token < h.PermitsFrom) {
			return fmt.Errorf("grant %d of semaphore %q: permits are recorded from token %d", g.Token, g.Semaphore, h.PermitsFrom)
		}
		last = g.Token
		if g.Mode != "" && (g.Mode != entry.ModeShared || g.Lock == "") {
			return fmt.Errorf("grant %d of lock %q with mode %q", g.Token, g.Lock, g.Mode)
		}
		switch g.Ended {
		case "", entry.EndReleased, entry.EndExpired, entry.EndHandedOff, entry.EndVoided:
		case entry.EndRevoked:
			// A state that revoked anything remembers a revoke for good
			// (fsm/internal/revoked), so its header says so.
			if h.Revoked == 0 {
				return fmt.Errorf("grant %d ended revoked in a state that remembers no revoke", g.Token)
			}
		default:
			return fmt.Errorf("grant %d ended %q", g.Token, g.Ended)
		}
		if i >= len(img.Grants)-h.GrantRing && g.Token < h.GrantsFrom {
			return fmt.Errorf("grant %d is in the ring, below its first token %d", g.Token, h.GrantsFrom)
		}
	}
	return nil
}

// CheckHeldGrants refuses a grant history in which a grant is still held
// although its lock is not held with that token (held returns a lock's
// current token, 0 when it is free), or its permit is not among img's.
func (img *Image) CheckHeldGrants(held func(lock string) uint64) error {
	var permits map[uint64]string // token → semaphore, made for the first held permit
	for _, g := range img.Grants {
		if g.Ended != "" {
			continue
		}
		if g.Semaphore != "" {
			if permits == nil {
				permits = make(map[uint64]string, len(img.Permits))
				for _, p := range img.Permits {
					permits[p.Token] = p.Semaphore
				}
			}
			if sem, ok := permits[g.Token]; !ok || sem != g.Semaphore {
				return fmt.Errorf("snapshot is inconsistent: permit %d of semaphore %q is still held, and the semaphore holds no permit with it", g.Token, g.Semaphore)
			}
			continue
		}
		if g.Mode != "" {
			if !img.sharedHeld(g.Lock, g.Token) {
				return fmt.Errorf("snapshot is inconsistent: shared grant %d of lock %q is still held, and the lock holds no shared grant with it", g.Token, g.Lock)
			}
			continue
		}
		if held(g.Lock) != g.Token {
			return fmt.Errorf("snapshot is inconsistent: grant %d of lock %q is still held, and the lock is not held with it", g.Token, g.Lock)
		}
	}
	return nil
}

// appendGrantRecord appends g's snapshot line, byte for byte what
// json.Encoder writes for Record{Grant: g}, newline included, as
// appendLockRecord does for locks (a history of 100,000 grants is 100,000
// lines); false, with dst unchanged in length, when a string needs what
// encoding/json would escape.
func appendGrantRecord(dst []byte, g *entry.GrantRecord) ([]byte, bool) {
	if len(g.Names) > 0 {
		return dst, false // a multi-grant's: rare, left to encoding/json
	}
	w := lineWriter{b: dst, ok: true}
	w.uint(`{"grant":{"token":`, g.Token)
	if g.Lock != "" {
		w.str(`,"lock":"`, g.Lock)
	}
	if g.Semaphore != "" {
		w.str(`,"semaphore":"`, g.Semaphore)
	}
	w.str(`,"holder":"`, g.Holder)
	w.uint(`,"granted_index":`, g.GrantedIndex)
	if g.Ended != "" {
		w.str(`,"ended":"`, g.Ended)
	}
	if g.EndedIndex != 0 {
		w.uint(`,"ended_index":`, g.EndedIndex)
	}
	if g.Mode != "" {
		w.str(`,"mode":"`, g.Mode)
	}
	return w.end(len(dst))
}

// Grant writes a grant record: the bytes Encode(Record{Grant: g}) writes.
func (sw *Writer) Grant(g *entry.GrantRecord) { writeLine(sw, g, appendGrantRecord, Record{Grant: g}) }

// parseGrantRecord reads a grant line as appendGrantRecord writes it
// (without its newline), as parseLockRecord does for locks: false for
// anything else, which the caller decodes with encoding/json.
func parseGrantRecord(line []byte, g *entry.GrantRecord) bool {
	p := lockParser{b: line}
	var lock, sem, holder, ended []byte
	*g = entry.GrantRecord{}
	ok := p.lit(`{"grant":{"token":`) && p.uint(&g.Token) &&
		(p.lit(`,"lock":`) && p.str(&lock) || p.lit(`,"semaphore":`) && p.str(&sem)) &&
		p.lit(`,"holder":`) && p.str(&holder) &&
		p.lit(`,"granted_index":`) && p.uint(&g.GrantedIndex)
	if !ok {
		return false
	}
	if p.lit(`,"ended":`) {
		if !p.str(&ended) {
			return false
		}
		switch string(ended) { // the constants: no string per record
		case entry.EndReleased:
			g.Ended = entry.EndReleased
		case entry.EndExpired:
			g.Ended = entry.EndExpired
		case entry.EndHandedOff:
			g.Ended = entry.EndHandedOff
		case entry.EndVoided:
			g.Ended = entry.EndVoided
		case entry.EndRevoked:
			g.Ended = entry.EndRevoked
		default:
			g.Ended = string(ended)
		}
	}
	if p.lit(`,"ended_index":`) && !p.uint(&g.EndedIndex) {
		return false
	}
	var mode []byte
	if p.lit(`,"mode":`) && !p.str(&mode) {
		return false
	}
	if !p.lit("}}") || len(p.b) != 0 {
		return false
	}
	g.Lock, g.Semaphore, g.Holder = string(lock), string(sem), string(holder)
	if len(mode) > 0 {
		g.Mode = entry.ModeShared
		if string(mode) != entry.ModeShared {
			g.Mode = string(mode) // refused by checkGrants
		}
	}
	return true
}
