#!/usr/bin/env python3
"""A job that takes a lock and writes with its fencing token.

Run two or more at once against `make run` (or `vigil dev`): they take turns, and the file
they write refuses a write whose token is smaller than one it has seen, so a worker that lost
its lock (paused past its lease, say) cannot overwrite a newer holder's work.

    python3 examples/python/worker.py --out /tmp/report.txt --rounds 5 &
    python3 examples/python/worker.py --out /tmp/report.txt --rounds 5

It needs the Python client installed (pip install --no-build-isolation pkg/api/python).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import sys
import time

import grpc

from vigil.errors import LockLost, Unavailable
from vigil.lockclient import LockTimeout, Mutex


class FencedFile:
    """A file that keeps the largest fencing token it was written with and refuses smaller
    ones: the storage side of fencing, here a JSON file guarded by flock."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, text: str, token: int) -> bool:
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            raw = f.read()
            seen = json.loads(raw)["token"] if raw else 0
            if token < seen:
                return False  # a stale holder: someone with a newer token wrote already
            f.seek(0)
            f.truncate()
            json.dump({"token": token, "text": text}, f)
            return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--locks", default=os.environ.get("VIGIL_LOCKS_ADDR", "127.0.0.1:7002"), help="lock service gRPC address")
    p.add_argument("--resource", default="nightly-report", help="the lock's name")
    p.add_argument("--out", default="report.txt", help="the fenced file to write")
    p.add_argument("--rounds", type=int, default=3, help="how many times to take the lock and write")
    p.add_argument("--work", type=float, default=1.0, help="seconds of work under the lock")
    args = p.parse_args()

    me = f"{socket.gethostname()}-{os.getpid()}"
    out = FencedFile(args.out)
    with grpc.insecure_channel(args.locks) as channel:
        for round_ in range(1, args.rounds + 1):
            try:
                # ttl=10: the lock frees itself 10 s after this process dies; renewed meanwhile.
                with Mutex(channel, args.resource, owner=me, ttl=10, wait=60) as m:
                    print(f"{me}: round {round_}: holding {args.resource!r} with fencing token {m.fencing_token}")
                    time.sleep(args.work)  # the work
                    m.check()  # LockLost if the hold ended meanwhile: do not write
                    if out.write(f"round {round_} by {me}", m.fencing_token):
                        print(f"{me}: wrote {args.out} with token {m.fencing_token}")
                    else:
                        print(f"{me}: {args.out} refused token {m.fencing_token}: a newer holder wrote")
            except LockTimeout as e:
                print(f"{me}: {e}")
            except LockLost as e:
                print(f"{me}: {e}; not written")
            except Unavailable as e:
                print(f"{me}: the lock service is unreachable: {e}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
