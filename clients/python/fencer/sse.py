"""Reading ``GET /v1/events`` (Server-Sent Events), and resuming it, apart
from any socket: the Go client's rules (``api/client/internal/watch``).

Every member emits the same events with the same indexes, and only the last
event of a log entry carries an ``id:``. So a watch remembers the index of
the last entry it delivered in full and, on reconnecting anywhere, sends it
as ``Last-Event-ID``; the events of an entry that was cut in the middle
come again, and :class:`Resume` drops those already delivered. Each event
arrives once, in order, across reconnections.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import answer
from .errors import BadAnswer


class EventLines:
    """The fields of one event, gathered line by line. An ``id:`` counts
    only once its event is complete: a stream cut between an id and its
    event's end resumes before that event, not after it."""

    def __init__(self) -> None:
        self.type = ""
        self.data: List[str] = []
        self.id: Optional[str] = None
        self.retry: Optional[float] = None

    def line(self, text: str) -> bool:
        """Add one line (its end of line stripped); True when it ended the
        event (a blank line)."""
        if text == "":
            return True
        if text.startswith(":"):
            return False
        field, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self.type = value
        elif field == "data":
            self.data.append(value)
        elif field == "id" and "\0" not in value:
            self.id = value
        elif field == "retry" and value.isdigit():
            self.retry = int(value) / 1000.0
        return False


class Resume:
    """Where a watch is: ``last``, the index of the last entry delivered in
    full (the next connection's ``Last-Event-ID``), and the events of a
    partly delivered entry, to skip when they come again."""

    def __init__(self, since: int) -> None:
        self.since = since
        self.last = since
        self._partial_index = 0
        self._partial = 0
        self._skip = 0

    def reconnected(self) -> None:
        """A new connection resumes after ``last``: the events of a partly
        delivered entry come again, and that many are skipped."""
        self._skip, self._partial = self._partial, 0

    def take(self, ev: EventLines) -> Optional[Dict[str, Any]]:
        """The event to deliver for a complete SSE event, or None when there
        is none (no data, or one delivered before a reconnection). Raises
        :class:`Lagged` when the member cut the stream off (resume now,
        from ``last``), :class:`~fencer.errors.BadAnswer` for a malformed
        event."""
        if not ev.data:
            return None
        e = answer.obj("\n".join(ev.data).encode("utf-8"), "GET /v1/events")
        if not e.get("type"):
            e["type"] = ev.type
        index = e.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise BadAnswer("GET /v1/events: event index %r is not an index" % (index,), reason="malformed")
        if e["type"] == "lagged":
            self.last = max(self.last, index)
            raise Lagged(self.last)
        if ev.id is None:
            if index != self._partial_index:
                self._partial_index, self._partial = index, 0
            self._partial += 1
            if self._skip > 0 and index == self._partial_index:
                self._skip -= 1
                return None
        else:
            if not ev.id.isdigit():
                raise BadAnswer("GET /v1/events: malformed event id %r" % ev.id, reason="malformed")
            self.last, self._partial, self._skip = int(ev.id), 0, 0
        return e


class Lagged(Exception):
    """The member cut a slow reader off; resume from ``index``."""

    def __init__(self, index: int) -> None:
        super().__init__("lagged at index %d" % index)
        self.index = index
