package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/cluster"
)

func (s *Server) clusterRoutes() chi.Router {
	r := chi.NewRouter()
	r.Get("/", s.clusterStatus)
	r.With(s.fwd.leaderOnly).Post("/join", s.join)
	return r
}

func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.c.Status()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := ClusterStatus{
		Node:         st.ID,
		State:        st.State,
		Leader:       st.Leader,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		LastIndex:    st.LastIndex,
		LastContact:  st.LastContact,
		Epoch:        st.Epoch,
		LastToken:    st.LastToken,
		Members:      make([]Member, len(st.Members)),
	}
	for i, m := range st.Members {
		out.Members[i] = Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Voter: m.Voter, Leader: m.Leader}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	var req cluster.JoinRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.ID == "" || req.RaftAddr == "" || req.HTTPAddr == "" {
		writeErr(w, badRequest(CodeInvalidMember, "join needs id, raft_addr and http_addr"))
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.c.Join(ctx, req); err != nil {
		writeErr(w, err)
		return
	}
	s.log.Info("member joined", "id", req.ID, "raft_addr", req.RaftAddr, "http_addr", req.HTTPAddr, "from", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"joined": req.ID})
}
