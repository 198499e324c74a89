"""Fenced writes to Redis: the Python side of fence/redisfence.

    import redis
    from fencer.redis_fence import Cmd, RedisFence

    fence = RedisFence(redis.Redis(host="127.0.0.1", port=6379))
    fence.set("report", lease.token, "report", body)            # SET, fenced
    fence.execute("order:42", lease.token,
                  Cmd.hset("order:42", {"state": "paid"}),
                  Cmd.delete("order:42:hold"))                  # one fenced write

A write passes only if its token is greater than the scope's mark (or equal
with a greater ``seq``); a missing or zero token is refused. The check, the
commands and the new mark run in one Lua script, which Redis runs atomically
(redis_fence.lua, the very text Go's fence/redisfence runs: Go and Python
writers of one scope share one rule). A stale write raises
:class:`fencer.StaleToken` and changes nothing; a command that fails in Redis
raises :class:`RedisCommandFailed` after the keys it named are put back as
they were, and the mark does not move.

The server must persist with ``appendonly yes`` and ``appendfsync always``
and never evict the mark keys (``maxmemory-policy noeviction``): see
docs/fences.md. Needs redis-py (Debian's python3-redis); the rest of the
fencer package does not.
"""

from __future__ import annotations

import os
from typing import Any, List, Mapping, NamedTuple, Sequence, Tuple

from .errors import FencerError, InvalidRequest, MissingToken, StaleToken

__all__ = ["MARK_PREFIX", "mark_key", "Cmd", "RedisFence", "RedisCommandFailed", "CorruptMark"]

#: Prefix of every scope's mark key, a hash with fields ``token`` and ``seq``.
MARK_PREFIX = "fencer:high_water:"

_MAX = 2**64 - 1

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis_fence.lua"), encoding="utf-8") as _f:
    #: The Lua script, shared with Go's fence/redisfence (a Go test keeps the
    #: two files identical).
    SCRIPT = _f.read()


def mark_key(scope: str) -> str:
    """The key of ``scope``'s mark."""
    return MARK_PREFIX + scope


class RedisCommandFailed(FencerError):
    """A command of an admitted write failed in Redis (WRONGTYPE, a syntax
    error): nothing was written and the mark did not move. ``index`` is the
    command's position in the call, from 0."""

    def __init__(self, index: int, name: str, error: str) -> None:
        super().__init__("redis_fence: command %d (%s) failed, nothing written: %s" % (index, name, error))
        self.index, self.name, self.error = index, name, error


class CorruptMark(FencerError):
    """A scope's mark key holds something other than a fencer mark; the write
    is refused rather than guessed at."""


class Cmd(NamedTuple):
    """One Redis command behind a fence: ``name``, then ``keys``, then
    ``args``, as in SET key value. Every key the command touches must be in
    ``keys``."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any] = ()

    @classmethod
    def set(cls, key: str, value: Any) -> "Cmd":
        """SET key value."""
        return cls("SET", [key], [value])

    @classmethod
    def hset(cls, key: str, mapping: Mapping[Any, Any]) -> "Cmd":
        """HSET key field value [field value ...]."""
        args: List[Any] = []
        for field, value in mapping.items():
            args += [field, value]
        return cls("HSET", [key], args)

    @classmethod
    def delete(cls, *keys: str) -> "Cmd":
        """DEL key [key ...]; an absent key is not an error."""
        return cls("DEL", list(keys))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _stored(v: Any) -> int:
    """A mark field as the script stores it: a canonical decimal."""
    s = _text(v)
    if not s.isdigit() or not s.isascii() or (len(s) > 1 and s[0] == "0") or int(s) > _MAX:
        raise ValueError(s)
    return int(s)


class RedisFence:
    """Fenced writes through ``client``, a redis-py ``Redis`` (or anything
    with its ``register_script`` and ``hmget``)."""

    def __init__(self, client: Any) -> None:
        from redis.exceptions import ResponseError  # python3-redis, only here

        self._client = client
        self._script = client.register_script(SCRIPT)
        self._response_error = ResponseError

    def execute(self, scope: str, token: int, *cmds: Cmd, seq: int = 0) -> List[Any]:
        """Run ``cmds`` as one write fenced by (token, seq) on ``scope`` and
        return their replies; with no commands, only advance the mark."""
        if not scope:
            raise InvalidRequest("redis_fence: empty scope", code="empty_key")
        if isinstance(token, bool) or not isinstance(token, int) or not 0 < token <= _MAX:
            raise MissingToken("redis_fence: missing or malformed fencing token %r" % (token,), code="missing_token")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= _MAX:
            raise InvalidRequest("redis_fence: malformed fencing sequence %r" % (seq,), code="malformed_sequence")
        keys = [mark_key(scope)]
        args: List[Any] = [str(token), str(seq), len(cmds)]
        for i, c in enumerate(cmds):
            if not c.name or not c.keys:
                raise InvalidRequest("redis_fence: command %d (%r) needs a name and at least one key" % (i, c.name))
            for k in c.keys:
                if not k or _text(k).startswith(MARK_PREFIX):
                    raise InvalidRequest("redis_fence: command %d (%s) names key %r" % (i, c.name, k))
            keys += list(c.keys)
            args += [c.name, len(c.keys), len(c.args)] + list(c.args)
        try:
            res = self._script(keys=keys, args=args)
        except self._response_error as e:
            raise self._error(scope, cmds, str(e)) from e
        if len(res) == 2 and res[0] == 1:
            return list(res[1])
        if len(res) == 3 and res[0] == 0:
            high, high_seq = _stored(res[1]), _stored(res[2])
            body = {"code": "stale_token", "last_token": high, "last_seq": high_seq}
            raise StaleToken("redis_fence: stale fencing token %d/seq %d for %r: last accepted is %d/seq %d"
                             % (token, seq, scope, high, high_seq), code="stale_token", body=body)
        raise FencerError("redis_fence: unexpected answer from the fence script: %r" % (res,))

    def _error(self, scope: str, cmds: Tuple[Cmd, ...], msg: str) -> FencerError:
        code, _, rest = msg.partition(" ")
        if code == "FENCE_MISSING_TOKEN":
            return MissingToken("redis_fence: " + rest, code="missing_token")
        if code == "FENCE_MALFORMED_SEQUENCE":
            return InvalidRequest("redis_fence: " + rest, code="malformed_sequence")
        if code == "FENCE_CORRUPT_MARK":
            return CorruptMark("redis_fence: " + rest)
        if code == "FENCE_COMMAND_FAILED":
            n, _, err = rest.partition(" ")
            if n.isdigit() and 1 <= int(n) <= len(cmds):
                return RedisCommandFailed(int(n) - 1, cmds[int(n) - 1].name, err)
        return FencerError("redis_fence: write on %r: %s" % (scope, msg))

    def set(self, scope: str, token: int, key: str, value: Any, *, seq: int = 0) -> None:
        """SET key value, fenced by (token, seq) on ``scope``."""
        self.execute(scope, token, Cmd.set(key, value), seq=seq)

    def hset(self, scope: str, token: int, key: str, mapping: Mapping[Any, Any], *, seq: int = 0) -> int:
        """HSET key with ``mapping``, fenced; returns the number of new fields."""
        return int(self.execute(scope, token, Cmd.hset(key, mapping), seq=seq)[0])

    def delete(self, scope: str, token: int, *keys: str, seq: int = 0) -> int:
        """DEL keys, fenced; returns how many existed."""
        return int(self.execute(scope, token, Cmd.delete(*keys), seq=seq)[0])

    def advance(self, scope: str, token: int, *, seq: int = 0) -> None:
        """Move ``scope``'s mark to (token, seq) alone, or raise StaleToken."""
        self.execute(scope, token, seq=seq)

    def high_water(self, scope: str) -> Tuple[int, int]:
        """``scope``'s mark as (token, seq); (0, 0) if it has none."""
        token, seq = self._client.hmget(mark_key(scope), ["token", "seq"])
        if token is None and seq is None:
            return 0, 0
        try:
            t, s = _stored(token), _stored(seq)
        except (ValueError, TypeError, AttributeError):
            raise CorruptMark("redis_fence: %s holds %r, %r" % (mark_key(scope), token, seq)) from None
        if t == 0:
            raise CorruptMark("redis_fence: %s holds token 0" % mark_key(scope))
        return t, s
