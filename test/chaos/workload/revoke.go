package workload

import (
	"context"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// A locks client with Revokes sometimes acts as an operator (issue 28's
// revoke): it reads one of its locks and revokes the grant it finds, if
// another client holds it. The holder is told nothing until its next
// renewal (its keep-alive's, or the iteration's own, refused revoked), and
// meanwhile it goes on and writes with its token, lock-bound or not, as a
// holder paused through the revoke would: its lock-bound writes after the
// revoke must be refused (checker.RevokedWrites).

// revokeChance is the share of iterations that revoke another's grant.
const revokeChance = 0.04

// revokeOther reads lock and revokes its grant if another holds it.
func (w *worker) revokeOther(lock string) {
	var token uint64
	w.record(history.Op{Kind: history.Read, Target: lock}, func(ctx context.Context, op *history.Op) {
		st, err := w.c.Lock(ctx, lock)
		w.settle(op, err)
		if err == nil {
			op.Held, op.Token = st.Held, st.Token
			if st.Held && st.Holder != w.holder() {
				token = st.Token
			}
		}
	})
	if token == 0 {
		return
	}
	w.record(history.Op{Kind: history.Revoke, Target: lock, Token: token}, func(ctx context.Context, op *history.Op) {
		_, err := w.c.RevokeLock(ctx, lock, token)
		w.settle(op, err)
	})
}
