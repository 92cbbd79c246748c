#!/usr/bin/env python3
"""Acquire-and-release pairs per second through vigil.lockclient, one Session stream against
unary calls: how the helpers' transport was chosen (pkg/api/python/README.md has the numbers).

    VIGIL_LOCKS_ADDR=127.0.0.1:7002 python3 examples/python/bench_locks.py [pairs] [rounds]

Each round runs every mode once (the order alternating between rounds, so a machine's drift
hits both sides), each mode `pairs` pairs from one caller on a resource of its own, after a
warm-up. Printed per mode: the median pairs/s and client CPU µs per pair over the rounds, and
for the session modes the median of the rounds' session/unary ratios.

  sync-unary     Mutex: LockService.Acquire and Release, one blocking call each
  sync-session   the same two calls as messages on one Session stream, the way a threaded
                 client must drive it (a thread feeding the stream, one reading it): not in
                 the library, measured to show why Mutex stays on unary calls
  aio-unary      AsyncMutex(channel)
  aio-session    AsyncMutex(AsyncLockSession(channel))
"""

import asyncio
import itertools
import os
import queue
import statistics
import sys
import threading
import time
import uuid
from concurrent import futures

import grpc

from vigil.lockclient import AsyncLockSession, AsyncMutex, Mutex
from vigil.locks.v1 import locks_pb2, locks_pb2_grpc

ADDR = os.environ.get("VIGIL_LOCKS_ADDR", "127.0.0.1:7002")


class ThreadedSession:
    """A Session stream driven from threads: requests from a queue, answers by id."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.requests: "queue.SimpleQueue[object]" = queue.SimpleQueue()
        self.pending: "dict[int, futures.Future]" = {}
        self.ids = itertools.count(1)
        self.mu = threading.Lock()
        self.call = locks_pb2_grpc.LockServiceStub(channel).Session(iter(self.requests.get, None))
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        try:
            for resp in self.call:
                with self.mu:
                    fut = self.pending.pop(resp.id)
                fut.set_result(resp)
        except grpc.RpcError:
            pass

    def send(self, **call: object) -> locks_pb2.SessionResponse:
        fut: futures.Future = futures.Future()
        req = locks_pb2.SessionRequest(id=next(self.ids), **call)
        with self.mu:
            self.pending[req.id] = fut
        self.requests.put(req)
        return fut.result(5)

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


def sync_unary(n: int) -> None:
    with grpc.insecure_channel(ADDR) as ch:
        m = Mutex(ch, f"bench-{uuid.uuid4().hex[:8]}", ttl=30)
        for _ in range(n):
            m.acquire()
            m.release()


def sync_session(n: int) -> None:
    with grpc.insecure_channel(ADDR) as ch:
        s = ThreadedSession(ch)
        r, o = f"bench-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
        for _ in range(n):
            assert s.send(acquire=locks_pb2.AcquireRequest(resource=r, owner=o, ttl_ms=30_000)).acquire.acquired
            assert s.send(release=locks_pb2.ReleaseRequest(resource=r, owner=o)).release.released
        s.close()


async def aio(n: int, session: bool) -> None:
    ch = grpc.aio.insecure_channel(ADDR)
    locks = AsyncLockSession(ch) if session else ch
    m = AsyncMutex(locks, f"bench-{uuid.uuid4().hex[:8]}", ttl=30)
    for _ in range(n):
        await m.acquire()
        await m.release()
    if session:
        await locks.close()
    await ch.close()


MODES = {
    "sync-unary": sync_unary,
    "sync-session": sync_session,
    "aio-unary": lambda n: asyncio.run(aio(n, False)),
    "aio-session": lambda n: asyncio.run(aio(n, True)),
}


def main(pairs: int = 300, rounds: int = 5) -> None:
    rate: "dict[str, list[float]]" = {m: [] for m in MODES}
    cpu: "dict[str, list[float]]" = {m: [] for m in MODES}
    names = list(MODES)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            MODES[name](20)  # warm-up: connection, first stream, code paths
            wall, proc = time.perf_counter(), time.process_time()
            MODES[name](pairs)
            wall, proc = time.perf_counter() - wall, time.process_time() - proc
            rate[name].append(pairs / wall)
            cpu[name].append(proc / pairs * 1e6)
    for name in names:
        line = f"{name:13} {statistics.median(rate[name]):6.0f} pairs/s  {statistics.median(cpu[name]):5.0f} µs client CPU/pair"
        if name.endswith("session"):
            base = name.replace("session", "unary")
            ratios = [s / u for s, u in zip(rate[name], rate[base])]
            line += f"  session/unary {statistics.median(ratios):.2f} (rounds: {' '.join(f'{x:.2f}' for x in ratios)})"
        print(line, flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
