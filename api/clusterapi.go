package api

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/limits"
)

func (s *Server) clusterRoutes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", handleJSON(s.clusterStatus))
	r.Get("/members", handleJSON(s.memberStatuses))
	r.Group(func(r chi.Router) {
		r.Use(s.fwd.LeaderOnly)
		r.Post("/join", handleJSON(s.join))
		r.Post("/members", handleJSON(s.addMember))
		r.Delete("/members/{id}", handleJSON(s.removeMember))
		r.Post("/leader/transfer", handleJSON(s.transferLeader))
		r.Get("/snapshot", s.snapshotSave)
		r.Post("/restore", handleJSON(s.snapshotRestore))
	})
	return r
}

func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) (any, error) {
	st, err := s.c.Status()
	if err != nil {
		return nil, err
	}
	return st, nil
}

// The members view's limit per client (limits.ClientKey: its principal,
// else its address): a dashboard polls it once a second, and each call
// asks every member.
const (
	MembersViewRate  = 4 // calls per second, sustained
	MembersViewBurst = 8
)

// memberStatuses answers every member's own view, which this node gathers
// (any node answers; nothing is forwarded), at most MembersViewRate times
// a second per client: past it, 429 rate_limited with Retry-After.
func (s *Server) memberStatuses(w http.ResponseWriter, r *http.Request) (any, error) {
	if ok, wait := s.membersView.Allow(limits.ClientKey(r)); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		return nil, &wire.Error{Code: wire.CodeRateLimited, Message: "too many members views from this client: at most " +
			strconv.Itoa(MembersViewRate) + " a second (each asks every member); retry after Retry-After"}
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	st, err := s.c.MemberStatuses(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Server) join(w http.ResponseWriter, r *http.Request) (any, error) {
	var req wire.JoinRequest
	if err := request.DecodeJSON(w, r, &req); err != nil {
		return nil, err
	}
	if req.ID == "" || req.RaftAddr == "" || req.HTTPAddr == "" {
		return nil, badRequest(wire.CodeInvalidMember, "join needs id, raft_addr and http_addr")
	}
	if err := request.CheckMemberAddrs(req.RaftAddr, req.HTTPAddr); err != nil {
		return nil, err
	}
	if p, ok := acl.PrincipalFrom(r.Context()); ok && p.Role == acl.RoleNode && p.Node != req.ID {
		// A member joins as itself only: its credential (certificate,
		// signature, or the cluster secret for a member without a key)
		// names it, and a join under another id would move that member.
		return nil, &wire.Error{Code: wire.CodeForbidden, Message: p.Name + " may join only as " + p.Node + ", not as " + req.ID}
	}
	req.MemberKey = r.Header.Get(wire.HeaderMemberKey)
	if h := r.Header.Get(wire.HeaderLogFormat); h != "" {
		f, err := strconv.Atoi(h)
		if err != nil || f < 0 || f > 255 {
			return nil, badRequest(wire.CodeInvalidMember, wire.HeaderLogFormat+": want a small non-negative integer")
		}
		req.LogFormat = f
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.c.Join(ctx, req); err != nil {
		return nil, err
	}
	s.log.Info("member joined", "id", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr, "from", r.RemoteAddr)
	return wire.JoinResponse{Joined: req.ID}, nil
}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request) (any, error) {
	var req wire.AddMemberRequest
	if err := request.DecodeJSON(w, r, &req); err != nil {
		return nil, err
	}
	if !wire.ValidNodeID(req.ID) || req.RaftAddr == "" || req.HTTPAddr == "" {
		return nil, badRequest(wire.CodeInvalidMember, "want id ("+wire.NodeIDRule+"), raft_addr and http_addr")
	}
	if err := request.CheckMemberAddrs(req.RaftAddr, req.HTTPAddr); err != nil {
		return nil, err
	}
	voter := req.Voter == nil || *req.Voter
	ctx, cancel := s.work(r, 0)
	defer cancel()
	err := s.c.Join(ctx, wire.JoinRequest{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Voter: voter})
	if err != nil {
		return nil, err
	}
	s.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", voter, "by", r.RemoteAddr)
	return wire.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Voter: voter}, nil
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) (any, error) {
	id := chi.URLParam(r, "id")
	if !wire.ValidNodeID(id) {
		return nil, badRequest(wire.CodeInvalidMember, "member id: want "+wire.NodeIDRule)
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.c.RemoveMember(ctx, id); err != nil {
		return nil, err
	}
	s.log.Info("member removed", "id", id, "by", r.RemoteAddr)
	return wire.RemoveMemberResponse{Removed: id}, nil
}

func (s *Server) transferLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	var req wire.TransferRequest
	if r.ContentLength != 0 {
		if err := request.DecodeJSON(w, r, &req); err != nil {
			return nil, err
		}
	}
	if req.ID != "" && !wire.ValidNodeID(req.ID) {
		return nil, badRequest(wire.CodeInvalidMember, "member id: want "+wire.NodeIDRule)
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.c.TransferLeadership(ctx, req.ID); err != nil {
		return nil, err
	}
	s.log.Info("leadership transferred", "to", req.ID, "by", r.RemoteAddr)
	return wire.TransferResponse{To: req.ID, Transferred: "ok"}, nil
}

// MaxSnapshotBytes caps a restore upload.
const MaxSnapshotBytes = 1 << 30

// RestorePath is the route that takes a snapshot upload, the one body that
// may exceed the server's request body cap (MaxSnapshotBytes applies).
const RestorePath = "/v1/cluster/restore"

// snapshotSave streams a consistent snapshot from the leader. The body is
// buffered so that a failure is still reported as an error, not as a
// truncated file: in a temporary file (0600, in the node's data directory,
// removed after), not in memory, where a million held
// leases (a 255 MB snapshot, a buffer grown by doubling) raised the
// leader's RSS by 340 MB for the download (issue 31).
func (s *Server) snapshotSave(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.work(r, time.Minute)
	defer cancel()
	f, err := os.CreateTemp(s.scratch, ".snapshot-download-*") // 0600
	if err != nil {
		writeErr(w, err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bufio.NewWriterSize(f, 1<<20)
	h, err := s.c.Backup(ctx, buf)
	if err == nil {
		err = buf.Flush()
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	hdr, _ := json.Marshal(h)
	w.Header().Set(wire.HeaderSnapshot, string(hdr))
	w.Header().Set("Content-Type", "application/x-fencer-snapshot")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, f)
	s.log.Info("snapshot saved", "applied_index", h.AppliedIndex, "last_token", h.LastToken, "bytes", size, "by", r.RemoteAddr)
}

// snapshotRestore replaces the cluster's state with an uploaded backup; see
// cluster.Node.Restore for the token rule.
func (s *Server) snapshotRestore(w http.ResponseWriter, r *http.Request) (any, error) {
	var opts cluster.RestoreOptions
	if v := r.URL.Query().Get("min_epoch"); v != "" {
		e, err := strconv.ParseUint(v, 10, 24)
		if err != nil {
			return nil, badRequest(wire.CodeInvalidSnapshot, "min_epoch: want an integer below 2^24")
		}
		opts.MinEpoch = e
	}
	ctx, cancel := s.work(r, 2*time.Minute)
	defer cancel()
	h, err := s.c.Restore(ctx, http.MaxBytesReader(w, r.Body, MaxSnapshotBytes), opts)
	if err != nil {
		return nil, err
	}
	s.log.Info("restored from snapshot", "epoch", h.Epoch, "last_token", h.LastToken, "keys", h.Keys, "by", r.RemoteAddr)
	return h, nil
}
