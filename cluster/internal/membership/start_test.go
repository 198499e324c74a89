package membership

import (
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

func TestPlanStart(t *testing.T) {
	initial := []raft.Server{{ID: "n1", Address: "r1"}, {ID: "n2", Address: "r2"}}
	self := raft.ServerAddress("r1")
	for _, tc := range []struct {
		name    string
		start   Start
		view    View
		want    StartPlan
		wantErr bool
	}{
		{name: "restart", start: Start{Bootstrap: true, HasState: true}},
		{name: "bootstrap alone", start: Start{ID: "n1", Bootstrap: true}, want: StartPlan{Bootstrap: []raft.Server{{ID: "n1", Address: self}}}},
		{name: "bootstrap the initial cluster", start: Start{ID: "n1", Initial: initial},
			want: StartPlan{Bootstrap: []raft.Server{{ID: "n1", Address: "r1"}, {ID: "n2", Address: "r2"}}}},
		{name: "the initial cluster runs: join it", start: Start{ID: "n1", Initial: initial}, view: View{Running: true},
			want: StartPlan{PreJoin: true}},
		{name: "join", start: Start{ID: "n3", Join: true}, want: StartPlan{PreJoin: true}},
		{name: "restart with state: no join", start: Start{ID: "n3", Join: true, HasState: true}},
		{name: "neither", start: Start{ID: "n3"}},
		{name: "another cluster's data dir", start: Start{ID: "n1", Join: true, HasState: true, ClusterID: "c1"},
			view: View{ClusterID: "c2"}, wantErr: true},
		{name: "its own cluster", start: Start{ID: "n1", Join: true, HasState: true, ClusterID: "c1"},
			view: View{Running: true, ClusterID: "c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.start.Plan(tc.view, self)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}
