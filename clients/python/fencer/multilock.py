"""Multi-locks: several locks taken at once, every name or none, with one
fencing token and one lease for all of them (POST /v1/locks/acquire)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, MutableMapping, Optional, Sequence

from . import answer, calls
from .calls import MAX_NAMES  # noqa: F401 (part of this module's API)
from .errors import InvalidRequest, LeaseLost
from .lease import KeptAlive

if TYPE_CHECKING:
    from .client import Client, Response


class MultiLock(KeptAlive):
    """A held multi-lock: every lock of ``names`` with the one ``token``
    (pass it to every write; ``Fencing-Lock`` may name any of them) and one
    lease, kept alive in a background thread as a :class:`~fencer.Lease`'s.
    :meth:`release` frees every name at once."""

    def __init__(self, client: "Client", grant: Dict[str, Any], start: float) -> None:
        super().__init__(client, grant["ttl_ms"], start)
        self.names: List[str] = list(grant["names"])
        self.holder: str = grant.get("holder", "")
        self.token: int = int(grant["token"])
        self.secret: str = grant["lease"]
        self.existing: bool = bool(grant.get("existing", False))
        #: True when every name is held in shared mode.
        self.shared: bool = grant.get("mode") == "shared"
        self.what = "multi-lock %s token %d" % (",".join(self.names), self.token)
        self._released = False

    @property
    def lost(self) -> threading.Event:
        """Set as soon as the multi-lock may be lost."""
        return self._ended

    def _send_renewal(self, deadline: float, attempt_timeout: float) -> "Response":
        resp = self._client.request("POST", "/v1/locks/renew", {"lease": self.secret, "token": self.token},
                                    deadline=deadline, attempt_timeout=attempt_timeout)
        answer.multi_renewal(resp.json(), what=self.what, token=self.token, ttl_ms=self.ttl_ms)
        return resp

    def _give_back(self) -> None:
        release_multi(self._client, self.token, self.secret)

    def release(self) -> None:
        """Stop renewing and give every lock back, in one entry. Releasing a
        multi-lock already lost is not an error."""
        self._halt()
        with self._mu:
            if self._released:
                return
            self._released = True
            was_lost = self._cause is not None
        self._lose(LeaseLost("%s: released" % self.what, code="lease_lost"))
        try:
            self._give_back()
        except LeaseLost:
            if not was_lost:
                raise

    def __enter__(self) -> "MultiLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.release()
        except LeaseLost:
            pass

    def headers(self, name: str, headers: Optional[MutableMapping[str, str]] = None) -> MutableMapping[str, str]:
        """``Fencing-Token`` and ``Fencing-Lock: name`` (one of ``names``)
        added to ``headers`` (a new dict if None)."""
        if name not in self.names:
            raise InvalidRequest("%r is not a lock of %s" % (name, self.what))
        h: MutableMapping[str, str] = {} if headers is None else headers
        h["Fencing-Token"] = str(self.token)
        h["Fencing-Lock"] = name
        return h

    def put(self, key: str, value: bytes, *, lock: Optional[str] = None) -> int:
        """A fenced write of ``key`` with the token, checked against lock
        ``lock`` (one of ``names``; the first when None)."""
        self.check()
        return self._client.put(key, value, self.token, lock=lock or self.names[0])

    def __repr__(self) -> str:
        return "MultiLock(%r, token=%d, lost=%s)" % (self.names, self.token, self.lost.is_set())


def multi_lock(client: "Client", names: Sequence[str], ttl: float, holder: str, keep_alive: bool,
               wait: float = 0.0, mode: str = "exclusive") -> MultiLock:
    """Client.multi_lock's body."""
    body = calls.multi_body(names, holder, ttl, wait, mode)
    resp = client.request("POST", "/v1/locks/acquire", body, extra_timeout=wait)
    grant = answer.multi_grant(resp.json(), names=body["names"], holder=holder, ttl_ms=body["ttl_ms"],
                               request_id=body["request_id"])
    start = calls.lease_start(grant, resp.sent, resp.first_sent)
    m = MultiLock(client, grant, start)
    received = time.monotonic()
    if received - start > m.ttl / 3:
        m._confirm_late(received)
    m._start(keep_alive)
    return m


def release_multi(client: "Client", token: int, secret: str) -> None:
    """Release multi-grant ``token``; a retry that finds it gone, after an
    attempt whose answer was lost, counts as released."""
    try:
        client.request("POST", "/v1/locks/release", {"lease": secret, "token": token})
    except LeaseLost as e:
        if not getattr(e, "lost_answers", 0):
            raise
