"""A process that takes a lock, for test_lockclient's cross-process tests (not a test itself).

    lock_worker.py ADDR RESOURCE exclusive N LOG MARKER   N times: take the lock, create MARKER
        exclusively (it exists only while someone is inside), append the fencing token to LOG,
        remove MARKER, release; exits 3 if MARKER already existed (two holders at once).
    lock_worker.py ADDR RESOURCE hold TTL                 take the lock with that TTL, print its
        fencing token, then keep it (renewing) until killed.
"""

import os
import sys
import threading

import grpc

from vigil.lockclient import Mutex


def main(addr: str, resource: str, mode: str, *args: str) -> int:
    with grpc.insecure_channel(addr) as channel:
        if mode == "exclusive":
            n, log, marker = int(args[0]), args[1], args[2]
            for _ in range(n):
                with Mutex(channel, resource, ttl=10, wait=60) as m:
                    try:
                        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    except FileExistsError:
                        return 3
                    os.close(fd)
                    with open(log, "a") as f:
                        f.write(f"{m.fencing_token} {os.getpid()}\n")
                    os.remove(marker)
            return 0
        if mode == "hold":
            m = Mutex(channel, resource, ttl=float(args[0]))
            m.acquire(timeout=30)
            print(m.fencing_token, flush=True)
            threading.Event().wait()  # until killed; the renewal thread keeps the lock
        return 2


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
