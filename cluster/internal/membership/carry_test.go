package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
)

// future is a finished raft.IndexFuture.
type future struct{ err error }

func (f future) Error() error  { return f.err }
func (f future) Index() uint64 { return 0 }

// recorder is a fake Raft and apply that write down each change in order,
// and fail the change named by failAt.
type recorder struct {
	changes []string
	failAt  string
}

func (r *recorder) do(change string) error {
	r.changes = append(r.changes, change)
	if change == r.failAt {
		return errors.New("refused: " + change)
	}
	return nil
}

func (r *recorder) AddVoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return future{r.do(fmt.Sprintf("add voter %s@%s", id, addr))}
}

func (r *recorder) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return future{r.do(fmt.Sprintf("add nonvoter %s@%s", id, addr))}
}

func (r *recorder) RemoveServer(id raft.ServerID, _ uint64, _ time.Duration) raft.IndexFuture {
	return future{r.do(fmt.Sprintf("remove server %s", id))}
}

func (r *recorder) apply(cmd entry.Command) error {
	switch c := cmd.(type) {
	case *entry.RemoveMember:
		return r.do("forget " + c.ID)
	case *entry.SetMember:
		return r.do(fmt.Sprintf("record %s@%s %s", c.ID, c.RaftAddr, c.Incarnation))
	}
	return r.do(fmt.Sprintf("%T", cmd))
}

// A plan is carried out in its order (the old incarnation out, the
// conflicting servers out, the joiner's record, then the joiner in: a member
// in the configuration without a record would count as JSON-only), and a failed
// change stops it there, so that the next attempt plans from what was done.
func TestCarryInOrderAndStopsAtAFailure(t *testing.T) {
	conf := raft.Configuration{Servers: []raft.Server{voter("n1", "r1"), voter("n2", "r2"), voter("n3", "r4")}}
	known := entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Incarnation: "old", LogFormat: 1}
	req := wire.JoinRequest{ID: "n2", RaftAddr: "r4", HTTPAddr: "h2", Voter: true, Incarnation: "new", LogFormat: 1, Replace: true}
	plan, err := PlanJoin(conf, known, "", req)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"remove server n2", "forget n2", "remove server n3", "record n2@r4 new", "add voter n2@r4"}
	log := slog.New(slog.DiscardHandler)
	for i := -1; i < len(all); i++ {
		r := &recorder{}
		want := all
		if i >= 0 {
			r.failAt, want = all[i], all[:i+1]
		}
		err := plan.Carry(r, r.apply, time.Second, log, req)
		if (err != nil) != (i >= 0) || !reflect.DeepEqual(r.changes, want) {
			t.Errorf("failing at %q: %v, changes %q; want %q", r.failAt, err, r.changes, want)
		}
	}

	promote := JoinPlan{Add: &raft.Server{Suffrage: raft.Nonvoter, ID: "n5", Address: "r5"}}
	r := &recorder{}
	if err := promote.Carry(r, r.apply, time.Second, log, wire.JoinRequest{ID: "n5"}); err != nil || !reflect.DeepEqual(r.changes, []string{"add nonvoter n5@r5"}) {
		t.Errorf("a non-voter: %v, %q", err, r.changes)
	}
}
