package membership

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
)

func voter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

func nonvoter(id, addr string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
}

func TestPlanJoin(t *testing.T) {
	conf := raft.Configuration{Servers: []raft.Server{voter("n1", "r1"), voter("n2", "r2"), nonvoter("n3", "r3")}}
	n2 := entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Incarnation: "i2", LogFormat: 1}
	n3 := entry.Member{ID: "n3", RaftAddr: "r3", HTTPAddr: "h3", Incarnation: "i3", LogFormat: 1}
	join := func(id, raftAddr, httpAddr, inc string) wire.JoinRequest {
		return wire.JoinRequest{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr, Voter: true, Incarnation: inc, LogFormat: 1}
	}
	with := func(r wire.JoinRequest, f func(*wire.JoinRequest)) wire.JoinRequest { f(&r); return r }
	rec := func(m entry.Member) *entry.Member { return &m }
	add := func(s raft.Server) *raft.Server { return &s }

	for _, tc := range []struct {
		name    string
		known   entry.Member // the record of the joiner's id
		cluster string       // the cluster's id
		req     wire.JoinRequest
		want    JoinPlan
		err     error
	}{
		{name: "new voter", req: join("n4", "r4", "h4", "i4"),
			want: JoinPlan{Add: add(voter("n4", "r4")), Record: rec(entry.Member{ID: "n4", RaftAddr: "r4", HTTPAddr: "h4", Incarnation: "i4", LogFormat: 1})}},
		{name: "new non-voter", req: with(join("n4", "r4", "h4", "i4"), func(r *wire.JoinRequest) { r.Voter = false }),
			want: JoinPlan{Add: add(nonvoter("n4", "r4")), Record: rec(entry.Member{ID: "n4", RaftAddr: "r4", HTTPAddr: "h4", Incarnation: "i4", LogFormat: 1})}},
		{name: "already a member: nothing to do", known: n2, req: join("n2", "r2", "h2", "i2")},
		{name: "new http address: only the record", known: n2, req: join("n2", "r2", "h2b", "i2"),
			want: JoinPlan{Record: rec(entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2b", Incarnation: "i2", LogFormat: 1})}},
		{name: "non-voter asks to vote", known: n3, req: join("n3", "r3", "h3", "i3"),
			want: JoinPlan{Add: add(voter("n3", "r3")), Promote: true}},
		{name: "same id, new address: remove first", known: n2, req: join("n2", "r2b", "h2", "i2"),
			want: JoinPlan{Remove: []raft.Server{voter("n2", "r2")}, Add: add(voter("n2", "r2b")),
				Record: rec(entry.Member{ID: "n2", RaftAddr: "r2b", HTTPAddr: "h2", Incarnation: "i2", LogFormat: 1})}},
		{name: "another id on the address: remove first", req: join("n5", "r2", "h5", "i5"),
			want: JoinPlan{Remove: []raft.Server{voter("n2", "r2")}, Add: add(voter("n5", "r2")),
				Record: rec(entry.Member{ID: "n5", RaftAddr: "r2", HTTPAddr: "h5", Incarnation: "i5", LogFormat: 1})}},
		{name: "wiped voter refused", known: n2, req: join("n2", "r2", "h2", "new"), err: ErrConflict},
		{name: "wiped voter replaced", known: n2, req: with(join("n2", "r2", "h2", "new"), func(r *wire.JoinRequest) { r.Replace = true }),
			want: JoinPlan{Replace: "i2", Add: add(voter("n2", "r2")),
				Record: rec(entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Incarnation: "new", LogFormat: 1})}},
		{name: "operator add of a member as it is: nothing to do", known: n2,
			req: wire.JoinRequest{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Voter: true}},
		{name: "operator add keeps the recorded incarnation and format", known: n2,
			req:  wire.JoinRequest{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2b", Voter: true},
			want: JoinPlan{Record: rec(entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2b", Incarnation: "i2", LogFormat: 1})}},
		{name: "operator add on another raft address keeps the incarnation, not the format", known: n2,
			req: wire.JoinRequest{ID: "n2", RaftAddr: "r2b", HTTPAddr: "h2", Voter: true},
			want: JoinPlan{Remove: []raft.Server{voter("n2", "r2")}, Add: add(voter("n2", "r2b")),
				Record: rec(entry.Member{ID: "n2", RaftAddr: "r2b", HTTPAddr: "h2", Incarnation: "i2"})}},
		{name: "operator promotes a non-voter, keeping its record", known: n3,
			req:  wire.JoinRequest{ID: "n3", RaftAddr: "r3", HTTPAddr: "h3", Voter: true},
			want: JoinPlan{Add: add(voter("n3", "r3")), Promote: true}},
		{name: "another cluster's data dir", cluster: "c1", req: with(join("n4", "r4", "h4", "i4"), func(r *wire.JoinRequest) { r.ClusterID = "c2" }),
			err: ErrConflict},
		{name: "same cluster's data dir", cluster: "c1", known: n2, req: with(join("n2", "r2", "h2", "i2"), func(r *wire.JoinRequest) { r.ClusterID = "c1" })},
		{name: "bad id", req: join("n 4", "r4", "h4", "i4"), err: ErrConflict},
		{name: "no http address", req: join("n4", "r4", "", "i4"), err: ErrConflict},
		{name: "dry run changes nothing", req: with(join("n4", "r4", "h4", "i4"), func(r *wire.JoinRequest) { r.DryRun = true })},
		{name: "dry run of a wiped voter refused", known: n2, req: with(join("n2", "r2", "h2", "new"), func(r *wire.JoinRequest) { r.DryRun = true }),
			err: ErrConflict},
		{name: "dry run of a replacement", known: n2, req: with(join("n2", "r2", "h2", "new"), func(r *wire.JoinRequest) { r.DryRun, r.Replace = true, true })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanJoin(conf, tc.known, tc.cluster, tc.req)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}
