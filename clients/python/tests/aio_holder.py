"""A child process for tests/test_aio.py: it holds a lock with fencer.aio
and obeys lines on stdin, answering one JSON line each, so that the test
can SIGSTOP it while it holds the lock and look at it after SIGCONT.

    python3 -m tests.aio_holder ENDPOINTS LOCK TTL

prints {"token": T} once it holds LOCK, then for each line:
"state" -> {"valid": bool, "lost_set": bool}, "put KEY" -> {"put": token} or
{"error": code, "class": name}, "exit" -> exits."""

from __future__ import annotations

import asyncio
import json
import sys

from fencer import FencerError
from fencer.aio import Client


def say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main(endpoints: str, name: str, ttl: float) -> None:
    async with Client(endpoints.split(","), holder="aio-holder") as client:
        lease = await client.acquire(name, ttl=ttl)
        say({"token": lease.token})
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line in ("", "exit"):
                return
            if line == "state":
                # valid first: it reads the clock, as a holder's first look
                # after a pause would.
                valid = lease.valid
                say({"valid": valid, "lost_set": lease.lost.is_set()})
            elif line.startswith("put "):
                # The late write, sent without looking at the lease: the
                # fence, not the lease, must refuse it.
                try:
                    say({"put": await client.put(line[4:], b"late", lease.token)})
                except FencerError as e:
                    say({"error": e.code, "class": type(e).__name__})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
