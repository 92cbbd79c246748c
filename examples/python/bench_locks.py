#!/usr/bin/env python3
"""Acquire-and-release pairs per second from Python, over one LockService.Session stream and
over unary calls: how vigil.lockclient's transport was chosen (numbers in
pkg/api/python/README.md).

    VIGIL_LOCKS_ADDR=127.0.0.1:7002 python3 examples/python/bench_locks.py [pairs] [rounds] [callers]

Each round runs every mode once (the order alternating between rounds, so a machine's drift
hits both sides), each mode `pairs` pairs split among `callers` (default 1), each caller on a
resource of its own, after a warm-up: tasks share one channel (and one stream), threads open a
channel (and stream) each. Printed per mode: the median pairs/s and client CPU µs per pair over
the rounds, and for each session mode the median of the rounds' session/unary ratios.

  sync-unary     Acquire then Release, two blocking unary calls
  sync-session   the same as messages on a Session stream, driven as a threaded client must
                 (a thread feeding the stream, one reading it, answers matched by id)
  aio-unary      two grpc.aio unary calls
  aio-session    the same as messages on one grpc.aio Session stream shared by the tasks
                 (one write at a time, answers matched by id, a timer per call)
  mutex          vigil.lockclient.Mutex acquire() and release() (unary, renewal included)
  asyncmutex     vigil.lockclient.AsyncMutex, the same on grpc.aio
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
from typing import Any, Callable, Dict, List

import grpc

from vigil.lockclient import AsyncMutex, Mutex
from vigil.locks.v1 import locks_pb2, locks_pb2_grpc

ADDR = os.environ.get("VIGIL_LOCKS_ADDR", "127.0.0.1:7002")


def _names() -> "tuple[str, str]":
    return f"bench-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())


def _acquire(r: str, o: str) -> locks_pb2.AcquireRequest:
    return locks_pb2.AcquireRequest(resource=r, owner=o, ttl_ms=30_000)


class ThreadedSession:
    """A Session stream driven from threads: requests from a queue, answers by id."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.requests: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self.pending: Dict[int, futures.Future] = {}
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

    def send(self, **call: Any) -> locks_pb2.SessionResponse:
        fut: futures.Future = futures.Future()
        req = locks_pb2.SessionRequest(id=next(self.ids), **call)
        with self.mu:
            self.pending[req.id] = fut
        self.requests.put(req)
        return fut.result(5)

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


class AioSession:
    """A grpc.aio Session stream shared by tasks: one write at a time, answers by id."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.call = locks_pb2_grpc.LockServiceStub(channel).Session()
        self.pending: "Dict[int, asyncio.Future[Any]]" = {}
        self.ids = itertools.count(1)
        self.writing = asyncio.Lock()
        self.reader = asyncio.ensure_future(self.read())

    async def read(self) -> None:
        while True:
            resp = await self.call.read()
            if resp is grpc.aio.EOF:
                return
            fut = self.pending.pop(resp.id, None)
            if fut is not None and not fut.done():
                fut.set_result(resp)

    async def send(self, **call: Any) -> locks_pb2.SessionResponse:
        loop = asyncio.get_running_loop()
        req = locks_pb2.SessionRequest(id=next(self.ids), **call)
        fut = self.pending[req.id] = loop.create_future()
        timer = loop.call_later(5, lambda: fut.done() or fut.set_exception(TimeoutError()))
        async with self.writing:
            await self.call.write(req)
        try:
            return await fut
        finally:
            timer.cancel()

    def close(self) -> None:
        self.call.cancel()


def sync_unary(n: int) -> None:
    with grpc.insecure_channel(ADDR) as ch:
        stub, (r, o) = locks_pb2_grpc.LockServiceStub(ch), _names()
        for _ in range(n):
            assert stub.Acquire(_acquire(r, o), timeout=5).acquired
            assert stub.Release(locks_pb2.ReleaseRequest(resource=r, owner=o), timeout=5).released


def sync_session(n: int) -> None:
    with grpc.insecure_channel(ADDR) as ch:
        s, (r, o) = ThreadedSession(ch), _names()
        for _ in range(n):
            assert s.send(acquire=_acquire(r, o)).acquire.acquired
            assert s.send(release=locks_pb2.ReleaseRequest(resource=r, owner=o)).release.released
        s.close()


def mutex(n: int) -> None:
    with grpc.insecure_channel(ADDR) as ch:
        m = Mutex(ch, _names()[0], ttl=30)
        for _ in range(n):
            m.acquire()
            m.release()


async def aio_unary(ch: grpc.aio.Channel, n: int) -> None:
    stub, (r, o) = locks_pb2_grpc.LockServiceStub(ch), _names()
    for _ in range(n):
        assert (await stub.Acquire(_acquire(r, o), timeout=5)).acquired
        assert (await stub.Release(locks_pb2.ReleaseRequest(resource=r, owner=o), timeout=5)).released


async def aio_session(s: AioSession, n: int) -> None:
    r, o = _names()
    for _ in range(n):
        assert (await s.send(acquire=_acquire(r, o))).acquire.acquired
        assert (await s.send(release=locks_pb2.ReleaseRequest(resource=r, owner=o))).release.released


async def asyncmutex(ch: grpc.aio.Channel, n: int) -> None:
    m = AsyncMutex(ch, _names()[0], ttl=30)
    for _ in range(n):
        await m.acquire()
        await m.release()


async def _tasks(fn: Callable[..., Any], session: bool, n: int, callers: int) -> None:
    ch = grpc.aio.insecure_channel(ADDR)
    on = AioSession(ch) if session else ch
    await asyncio.gather(*(fn(on, n) for _ in range(callers)))
    if session:
        on.close()
    await ch.close()


def _threads(fn: Callable[[int], None]) -> Callable[[int, int], None]:
    def run(n: int, callers: int) -> None:
        threads = [threading.Thread(target=fn, args=(n,)) for _ in range(callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return run


# One event loop for the whole run: grpc.aio binds to the first loop it runs in.
LOOP = asyncio.new_event_loop()
MODES: Dict[str, Callable[[int, int], None]] = {
    "sync-unary": _threads(sync_unary),
    "sync-session": _threads(sync_session),
    "aio-unary": lambda n, c: LOOP.run_until_complete(_tasks(aio_unary, False, n, c)),
    "aio-session": lambda n, c: LOOP.run_until_complete(_tasks(aio_session, True, n, c)),
    "mutex": _threads(mutex),
    "asyncmutex": lambda n, c: LOOP.run_until_complete(_tasks(asyncmutex, False, n, c)),
}


def main(pairs: int = 300, rounds: int = 5, callers: int = 1) -> None:
    rate: Dict[str, List[float]] = {m: [] for m in MODES}
    cpu: Dict[str, List[float]] = {m: [] for m in MODES}
    names = list(MODES)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            MODES[name](20, 1)  # warm-up: connection, first stream, code paths
            wall, proc = time.perf_counter(), time.process_time()
            MODES[name](pairs // callers, callers)
            wall, proc = time.perf_counter() - wall, time.process_time() - proc
            done = pairs // callers * callers
            rate[name].append(done / wall)
            cpu[name].append(proc / done * 1e6)
    print(f"{pairs} pairs x {rounds} rounds, {callers} caller(s)")
    for name in names:
        line = f"{name:13} {statistics.median(rate[name]):6.0f} pairs/s  {statistics.median(cpu[name]):5.0f} µs client CPU/pair"
        if name.endswith("session"):
            ratios = [s / u for s, u in zip(rate[name], rate[name.replace("session", "unary")])]
            line += f"  session/unary {statistics.median(ratios):.2f} (rounds: {' '.join(f'{x:.2f}' for x in ratios)})"
        print(line, flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
