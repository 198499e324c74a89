package fsm

// ForceRecovery moves the epoch forward by bump, replaces the member records,
// and voids every held lock and remembered request, outside the log. The
// lost members may have expired and re-granted those locks; a grant from
// before a forced recovery is not trusted after it.
//
// It exists only for offline recovery after a permanent loss of quorum
// (cluster.Recover), where the log that would carry these changes has no
// quorum to commit them. Nothing else may call it.
func (f *FSM) ForceRecovery(bump uint64, members []Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.epoch += bump
	f.s.members = map[string]Member{}
	for _, m := range members {
		f.s.members[m.ID] = m
	}
	f.s.locks = map[string]*lockEntry{}
	f.s.byHolder = map[string]int{}
	f.s.requests = map[string]uint64{}
	f.s.reqOrder = nil
}
