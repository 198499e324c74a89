package event

import (
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// The event types are the contract's: the edge passes them through as
// they are, so a type spelled differently here would reach clients as a
// type they do not know.
func TestTypesAreTheContracts(t *testing.T) {
	for ours, theirs := range map[string]string{
		Acquired: wire.EventAcquired, Released: wire.EventReleased, Expired: wire.EventExpired,
		HandedOff: wire.EventHandedOff, Voided: wire.EventVoided, Put: wire.EventPut,
		KeyDeleted: wire.EventKeyDeleted, MemberAdded: wire.EventMemberAdded, MemberRemoved: wire.EventMemberRemoved,
		Epoch: wire.EventEpoch, ValueSet: wire.EventValueSet, PermitAcquired: wire.EventPermitAcquired,
		PermitReleased: wire.EventPermitReleased, PermitExpired: wire.EventPermitExpired, PermitHandedOff: wire.EventPermitHandedOff,
		Revoked: wire.EventRevoked, Queued: wire.EventQueued, Dequeued: wire.EventDequeued,
	} {
		if ours != theirs {
			t.Errorf("fsm's event type %q is %q in the contract", ours, theirs)
		}
	}
}
