package client

import (
	"fmt"

	"github.com/fencer-io/fencer/api/wire"
)

// What an answer must say before the client believes it (issue 26 F5, F6).
// A fencing client acts on what the server tells it: it writes with the
// token a grant names and trusts its lease until the TTL a grant or renewal
// reports. So every grant, renewal and fenced write is checked against what
// was asked (api/openapi.yaml's schemas), and one that does not match is
// ErrBadAnswer. JSON decoding already refuses a token that is negative, a
// fraction, a string or a bool; these checks refuse what decodes but is
// still not an answer to this request.

// checkGrant checks the grant an acquire of kind ("locks" or "semaphores")
// got for name against what the request asked. The name, holder and
// request id are the request's, the token is a token (not 0), the lease
// secret has its documented form, and the TTL is positive and no longer
// than asked: a longer one would keep the client believing in a grant the
// server was asked to end sooner.
func checkGrant(g wire.Grant, kind, name, holder string, ttlMillis int64, requestID string) error {
	what := fmt.Sprintf("acquire %s %q", kindNoun(kind), name)
	switch {
	case g.Lock != name:
		return badAnswer(what, "the answer names %s %q", kindNoun(kind), g.Lock)
	case g.Holder != holder:
		return badAnswer(what, "the answer names holder %q, not %q as asked", g.Holder, holder)
	case g.Token == 0:
		return badAnswer(what, "the answer has no token")
	case !leaseSecret(g.Lease):
		return badAnswer(what, "lease %q is not %d hexadecimal digits", g.Lease, wire.LeaseSecretLen)
	case g.TTLMillis <= 0:
		return badAnswer(what, "ttl_ms %d is not positive", g.TTLMillis)
	case g.TTLMillis > ttlMillis:
		return badAnswer(what, "ttl_ms %d is above the %d asked for", g.TTLMillis, ttlMillis)
	case g.RequestID != "" && g.RequestID != requestID:
		return badAnswer(what, "the answer is for request %q, not %q", g.RequestID, requestID)
	}
	return nil
}

// checkPermit adds a permit's own fields to checkGrant's: the limit asked
// and a count of held permits within it.
func checkPermit(p wire.PermitGrant, limit int) error {
	what := fmt.Sprintf("acquire semaphore %q", p.Semaphore)
	switch {
	case p.Limit != limit:
		return badAnswer(what, "the answer's limit %d is not the %d asked for", p.Limit, limit)
	case p.Held < 1 || p.Held > limit:
		return badAnswer(what, "held %d is not between 1 and the limit %d", p.Held, limit)
	}
	return nil
}

// renewAnswer is a lock's renewal answer (wire.RenewResponse) or a
// permit's (wire.SemRenewResponse), which differ in the name's field.
type renewAnswer struct {
	Lock      string `json:"lock"`
	Semaphore string `json:"semaphore"`
	Token     uint64 `json:"token"`
	TTLMillis int64  `json:"ttl_ms"`
}

// checkRenewal checks a renewal's answer: it names the grant renewed, and a
// TTL equal to ttlMillis when that is known (renewals take no TTL, so the
// server extends by the grant's), else a positive one.
func checkRenewal(a renewAnswer, kind, name string, token uint64, ttlMillis int64) error {
	what := fmt.Sprintf("renew %s %q token %d", kindNoun(kind), name, token)
	got := a.Lock
	if kind == "semaphores" {
		got = a.Semaphore
	}
	switch {
	case got != name:
		return badAnswer(what, "the answer names %s %q", kindNoun(kind), got)
	case a.Token != token:
		return badAnswer(what, "the answer names token %d", a.Token)
	case a.TTLMillis <= 0:
		return badAnswer(what, "ttl_ms %d is not positive", a.TTLMillis)
	case ttlMillis > 0 && a.TTLMillis != ttlMillis:
		return badAnswer(what, "ttl_ms %d is not the grant's %d", a.TTLMillis, ttlMillis)
	}
	return nil
}

// checkPut checks a fenced write's answer: only one that names the key and
// token is a stored write.
func checkPut(p wire.PutResponse, key string, token uint64) error {
	what := fmt.Sprintf("put %q token %d", key, token)
	switch {
	case p.Key != key:
		return badAnswer(what, "the answer names key %q: the write may or may not have been stored", p.Key)
	case p.Token != token:
		return badAnswer(what, "the answer names token %d: the write may or may not have been stored", p.Token)
	}
	return nil
}

func leaseSecret(s string) bool {
	if len(s) != wire.LeaseSecretLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

func kindNoun(kind string) string {
	if kind == "semaphores" {
		return "semaphore"
	}
	return "lock"
}

func badAnswer(what, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadAnswer, what, fmt.Sprintf(format, args...))
}

// checkSessionGrant is checkGrant for a grant under session, whose TTL is
// the session's (at most ttlMillis): it must also name the session, since
// a grant with a lease of its own would expire with nobody renewing it.
func checkSessionGrant(g wire.Grant, kind, name, holder string, session uint64, ttlMillis int64, requestID string) error {
	if err := checkGrant(g, kind, name, holder, ttlMillis, requestID); err != nil {
		return err
	}
	if g.Session != session {
		return badAnswer(fmt.Sprintf("acquire %s %q under session %d", kindNoun(kind), name, session), "the answer names session %d", g.Session)
	}
	return nil
}

// checkSession checks a session's creation against what was asked, as
// checkGrant a grant's.
func checkSession(s wire.Session, req wire.SessionRequest) error {
	const what = "create a session"
	switch {
	case s.Session == 0:
		return badAnswer(what, "the answer has no session id")
	case s.Holder != req.Holder:
		return badAnswer(what, "the answer names holder %q, not %q as asked", s.Holder, req.Holder)
	case !leaseSecret(s.Lease):
		return badAnswer(what, "lease %q is not %d hexadecimal digits", s.Lease, wire.LeaseSecretLen)
	case s.TTLMillis <= 0:
		return badAnswer(what, "ttl_ms %d is not positive", s.TTLMillis)
	case s.TTLMillis > req.TTLMillis:
		return badAnswer(what, "ttl_ms %d is above the %d asked for", s.TTLMillis, req.TTLMillis)
	case s.RequestID != "" && s.RequestID != req.RequestID:
		return badAnswer(what, "the answer is for request %q, not %q", s.RequestID, req.RequestID)
	}
	return nil
}

// checkSessionRenewal checks a session renewal's answer as checkRenewal a
// grant's: it names the session, and its TTL (when known, ttlMillis > 0).
func checkSessionRenewal(a wire.SessionRenewResponse, id uint64, ttlMillis int64) error {
	what := fmt.Sprintf("renew session %d", id)
	switch {
	case a.Session != id:
		return badAnswer(what, "the answer names session %d", a.Session)
	case a.TTLMillis <= 0:
		return badAnswer(what, "ttl_ms %d is not positive", a.TTLMillis)
	case ttlMillis > 0 && a.TTLMillis != ttlMillis:
		return badAnswer(what, "ttl_ms %d is not the session's %d", a.TTLMillis, ttlMillis)
	}
	return nil
}

// checkSessionClose checks a close's answer: it names the session, and
// each grant released is a lock's or a permit's with a token.
func checkSessionClose(a wire.SessionCloseResponse, id uint64) error {
	what := fmt.Sprintf("close session %d", id)
	if a.Session != id {
		return badAnswer(what, "the answer names session %d", a.Session)
	}
	for _, g := range a.Released {
		if (g.Kind != wire.GrantKindLock && g.Kind != wire.GrantKindSemaphore) || g.Token == 0 || g.Name == "" {
			return badAnswer(what, "released grant %+v is not a lock's or a semaphore's with a name and token", g)
		}
	}
	return nil
}
