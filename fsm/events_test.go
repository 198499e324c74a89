package fsm

import (
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// The event types are the contract's: the edge passes them through as
// they are, so a type spelled differently here would reach clients as a
// type they do not know.
func TestEventTypesAreTheContracts(t *testing.T) {
	for ours, theirs := range map[string]string{
		EventAcquired: wire.EventAcquired, EventReleased: wire.EventReleased, EventExpired: wire.EventExpired,
		EventHandedOff: wire.EventHandedOff, EventVoided: wire.EventVoided, EventPut: wire.EventPut,
		EventKeyDeleted: wire.EventKeyDeleted, EventMemberAdded: wire.EventMemberAdded, EventMemberRemoved: wire.EventMemberRemoved,
		EventEpoch: wire.EventEpoch, EventValueSet: wire.EventValueSet, EventPermitAcquired: wire.EventPermitAcquired,
		EventPermitReleased: wire.EventPermitReleased, EventPermitExpired: wire.EventPermitExpired, EventPermitHandedOff: wire.EventPermitHandedOff,
	} {
		if ours != theirs {
			t.Errorf("fsm's event type %q is %q in the contract", ours, theirs)
		}
	}
}
