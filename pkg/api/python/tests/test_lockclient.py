"""vigil.lockclient against a running stack (and against a service that never answers).

Run by deploy/python-client-test.sh (make test-python), which starts `vigil dev` and sets
VIGIL_LOCKS_ADDR. Upper bounds on elapsed time carry SLACK, the scheduling delay a loaded CI
machine may add; the lower bounds are exact.
"""

import asyncio
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from concurrent import futures
from typing import Callable, List

import grpc

from vigil.errors import DeadlineExceeded, InvalidArgument, LockLost, NotHeld, Unavailable
from vigil.lockclient import AsyncMutex, LockTimeout, Mutex
from vigil.locks.v1 import locks_pb2, locks_pb2_grpc

LOCKS = os.environ.get("VIGIL_LOCKS_ADDR", "127.0.0.1:7002")
SLACK = 2.0  # seconds a loaded machine may add to a bounded wait
WORKER = str(pathlib.Path(__file__).with_name("lock_worker.py"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Waits for cond with a deadline (the Python twin of pkg/wait)."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.02)


class SilentLockService(locks_pb2_grpc.LockServiceServicer):
    """A lock service that grants every acquire and never answers anything else: a paused peer."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def Acquire(self, request, context):
        return locks_pb2.AcquireResponse(acquired=True, fencing_token=7, expires_at=0)

    def _hang(self, request, context):
        self.stop.wait()
        context.abort(grpc.StatusCode.UNAVAILABLE, "stopped")

    Renew = Release = Get = _hang


def silent_server(testcase: unittest.TestCase, servicer_for: Callable[[threading.Event], object], add) -> str:
    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    add(servicer_for(stop), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    testcase.addCleanup(server.stop, 0)
    testcase.addCleanup(stop.set)
    return f"127.0.0.1:{port}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MutexTest(unittest.TestCase):
    def setUp(self):
        self.ch = grpc.insecure_channel(LOCKS)
        grpc.channel_ready_future(self.ch).result(timeout=60)
        self.addCleanup(self.ch.close)
        self.stub = locks_pb2_grpc.LockServiceStub(self.ch)

    def test_with_holds_then_releases(self):
        r = unique("py-mutex")
        with Mutex(self.ch, r, ttl=10, wait=5) as m:
            self.assertTrue(m.locked())
            self.assertFalse(m.lost)
            uuid.UUID(m.owner)  # the default owner is a UUID
            got = self.stub.Get(locks_pb2.GetRequest(resource=r), timeout=5)
            self.assertEqual((got.held, got.owner, got.fencing_token), (True, m.owner, m.fencing_token))
            m.check()
        self.assertIsNone(m.fencing_token)
        self.assertFalse(m.locked())
        self.assertFalse(self.stub.Get(locks_pb2.GetRequest(resource=r), timeout=5).held)

    def test_acquire_in_threading_lock_shape(self):
        r = unique("py-shape")
        a, b = Mutex(self.ch, r), Mutex(self.ch, r)
        self.assertTrue(a.acquire(blocking=False))
        self.assertFalse(b.acquire(blocking=False))
        with self.assertRaises(ValueError):
            b.acquire(blocking=False, timeout=1)
        start = time.monotonic()
        self.assertFalse(b.acquire(timeout=0.5))
        elapsed = time.monotonic() - start
        self.assertGreaterEqual(elapsed, 0.5)
        self.assertLess(elapsed, 0.5 + SLACK)
        first = a.fencing_token
        a.release()
        self.assertTrue(b.acquire(timeout=5))
        self.assertGreater(b.fencing_token, first)
        b.release()
        with self.assertRaises(NotHeld):
            b.release()

    def test_with_wait_raises_lock_timeout_in_time(self):
        r = unique("py-wait")
        with Mutex(self.ch, r) as holder:
            start = time.monotonic()
            with self.assertRaises(LockTimeout) as caught:
                with Mutex(self.ch, r, wait=0.3):
                    self.fail("entered a held lock")
            elapsed = time.monotonic() - start
            self.assertGreaterEqual(elapsed, 0.3)
            self.assertLess(elapsed, 0.3 + SLACK)
            self.assertEqual(caught.exception.holder, holder.owner)
            self.assertIn(r, str(caught.exception))

    def test_waiter_gets_the_lock_when_released(self):
        r = unique("py-fifo")
        holder = Mutex(self.ch, r)
        self.assertTrue(holder.acquire())
        got: List[int] = []
        waiter = Mutex(self.ch, r)
        t = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=30)))
        t.start()
        wait_until(lambda: self.stub.Get(locks_pb2.GetRequest(resource=r), timeout=5).held and t.is_alive(), 10, "waiter waiting")
        token = holder.fencing_token
        holder.release()
        t.join(30)
        self.assertEqual(got, [True])
        self.assertGreater(waiter.fencing_token, token)
        waiter.release()

    def test_renewal_keeps_a_one_second_lock_for_five_seconds(self):
        r = unique("py-renew")
        other = Mutex(self.ch, r)
        with Mutex(self.ch, r, ttl=1) as m:
            token = m.fencing_token
            end = time.monotonic() + 5
            while time.monotonic() < end:
                self.assertFalse(other.acquire(blocking=False), "another owner got a renewed lock")
                self.assertFalse(m.lost)
                time.sleep(0.25)
            got = self.stub.Get(locks_pb2.GetRequest(resource=r), timeout=5)
            self.assertEqual((got.owner, got.fencing_token), (m.owner, token))
            self.assertEqual(m.fencing_token, token)

    def test_mutual_exclusion_across_two_processes(self):
        r = unique("py-procs")
        with tempfile.TemporaryDirectory() as d:
            log, marker = os.path.join(d, "log"), os.path.join(d, "inside")
            procs = [subprocess.Popen([sys.executable, WORKER, LOCKS, r, "exclusive", "15", log, marker]) for _ in range(2)]
            for p in procs:
                self.assertEqual(p.wait(timeout=120), 0, "a worker found another inside the lock (exit 3) or failed")
            lines = pathlib.Path(log).read_text().split()
        tokens = [int(x) for x in lines[0::2]]
        pids = set(lines[1::2])
        self.assertEqual(len(tokens), 30)
        self.assertEqual(len(pids), 2)
        self.assertEqual(tokens, sorted(set(tokens)), "fencing tokens not strictly increasing in lock order")

    def test_killed_holders_lock_passes_to_the_next_waiter_after_its_ttl(self):
        r = unique("py-killed")
        holder = subprocess.Popen([sys.executable, WORKER, LOCKS, r, "hold", "1"], stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.stdout.close)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        token = int(holder.stdout.readline())
        self.assertGreater(token, 0)
        waiter = Mutex(self.ch, r)
        self.assertFalse(waiter.acquire(blocking=False))
        holder.kill()
        holder.wait()
        killed = time.monotonic()
        self.assertTrue(waiter.acquire(timeout=30))
        self.assertLess(time.monotonic() - killed, 1 + SLACK, "waited well past the holder's TTL")
        self.assertGreater(waiter.fencing_token, token)
        waiter.release()

    def test_threads_exclude_each_other(self):
        r = unique("py-threads")
        shared = Mutex(self.ch, r, ttl=10)
        inside, tokens, errors = [0], [], []
        order = threading.Lock()

        def work(m: Mutex) -> None:
            for _ in range(5):
                with m:
                    with order:
                        inside[0] += 1
                        if inside[0] != 1:
                            errors.append("two threads inside")
                        tokens.append(m.fencing_token)
                    time.sleep(0.005)
                    with order:
                        inside[0] -= 1

        # Two threads on one shared mutex (one owner) and two with mutexes of their own.
        mutexes = [shared, shared, Mutex(self.ch, r, ttl=10), Mutex(self.ch, r, ttl=10)]
        threads = [threading.Thread(target=work, args=(m,)) for m in mutexes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(len(tokens), 20)
        self.assertEqual(tokens, sorted(tokens), "fencing tokens went down")

    def test_lost_lock_is_reported(self):
        r = unique("py-lost")
        m = Mutex(self.ch, r, ttl=1)
        self.assertTrue(m.acquire())
        # Someone breaks the hold behind the mutex's back and another owner takes the lock.
        self.assertTrue(self.stub.Release(locks_pb2.ReleaseRequest(resource=r, owner=m.owner), timeout=5).released)
        self.assertTrue(self.stub.Acquire(locks_pb2.AcquireRequest(resource=r, owner="py-thief", ttl_ms=10_000), timeout=5).acquired)
        wait_until(lambda: m.lost, 10, "the mutex noticing the lost lock")
        with self.assertRaises(LockLost) as caught:
            m.check()
        self.assertIn("refused", str(caught.exception))
        with self.assertRaises(LockLost):
            m.release()
        self.assertFalse(m.locked())

    def test_release_is_fenced(self):
        r = unique("py-fenced")
        m = Mutex(self.ch, r, ttl=10)
        self.assertTrue(m.acquire())
        old = m.fencing_token
        # The owner's hold is given back and taken again behind the mutex's back: the mutex's
        # release (fenced with its own token) must leave that later hold alone.
        self.assertTrue(self.stub.Release(locks_pb2.ReleaseRequest(resource=r, owner=m.owner), timeout=5).released)
        later = self.stub.Acquire(locks_pb2.AcquireRequest(resource=r, owner=m.owner, ttl_ms=10_000), timeout=5)
        self.assertTrue(later.acquired)
        self.assertGreater(later.fencing_token, old)
        with self.assertRaises(LockLost):
            m.release()
        got = self.stub.Get(locks_pb2.GetRequest(resource=r), timeout=5)
        self.assertEqual((got.held, got.fencing_token), (True, later.fencing_token))

    def test_invalid_argument_carries_the_services_sentence(self):
        with self.assertRaises(InvalidArgument) as caught:
            Mutex(self.ch, unique("py-bad"), ttl=0.01).acquire(blocking=False)
        self.assertIn("ttl", caught.exception.details.lower())
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(InvalidArgument):
            Mutex(self.ch, "", ttl=5).acquire(blocking=False)
        with self.assertRaises(InvalidArgument):
            Mutex(self.ch, "r", wait=-1)


class TimeoutsTest(unittest.TestCase):
    """Every call ends by its deadline when the service never answers or cannot be reached."""

    def test_silent_service(self):
        addr = silent_server(self, SilentLockService, locks_pb2_grpc.add_LockServiceServicer_to_server)
        with grpc.insecure_channel(addr) as ch:
            m = Mutex(ch, "r", ttl=1, call_timeout=0.3)
            self.assertTrue(m.acquire(blocking=False))  # the silent service grants it...
            self.assertEqual(m.fencing_token, 7)
            start = time.monotonic()
            wait_until(lambda: m.lost, 1 + SLACK, "a lock whose renewals never answer marked lost")
            self.assertGreaterEqual(time.monotonic() - start, 0.5)  # ...not before its lease could end
            start = time.monotonic()
            with self.assertRaises(DeadlineExceeded):
                m.release(timeout=0.4)
            elapsed = time.monotonic() - start
            self.assertGreaterEqual(elapsed, 0.4)
            self.assertLess(elapsed, 0.4 + SLACK)
            self.assertFalse(m.locked())

    def test_silent_service_async(self):
        addr = silent_server(self, SilentLockService, locks_pb2_grpc.add_LockServiceServicer_to_server)

        async def body():
            ch = grpc.aio.insecure_channel(addr)
            try:
                m = AsyncMutex(ch, "r", ttl=1, call_timeout=0.3)
                self.assertTrue(await m.acquire(blocking=False))
                end = time.monotonic() + 1 + SLACK
                while not m.lost:
                    self.assertLess(time.monotonic(), end, "a lock whose renewals never answer not marked lost")
                    await asyncio.sleep(0.02)
                start = time.monotonic()
                with self.assertRaises(DeadlineExceeded):
                    await m.release(timeout=0.4)
                elapsed = time.monotonic() - start
                self.assertGreaterEqual(elapsed, 0.4)
                self.assertLess(elapsed, 0.4 + SLACK)
            finally:
                await ch.close()

        asyncio.run(body())

    def test_unreachable_service(self):
        with grpc.insecure_channel(f"127.0.0.1:{closed_port()}") as ch:
            for call in (lambda m: m.acquire(blocking=False), lambda m: m.acquire(timeout=10)):
                m = Mutex(ch, "r", call_timeout=0.5)
                start = time.monotonic()
                with self.assertRaises(Unavailable) as caught:
                    call(m)
                self.assertLess(time.monotonic() - start, 0.5 + SLACK)
                self.assertTrue(caught.exception.details)
                self.assertFalse(m.locked())


class AsyncMutexTest(unittest.TestCase):
    def run_async(self, coro_fn):
        async def main():
            ch = grpc.aio.insecure_channel(LOCKS)
            try:
                await asyncio.wait_for(ch.channel_ready(), 60)
                return await coro_fn(ch, ch)
            finally:
                await ch.close()

        return asyncio.run(main())

    def test_tasks_exclude_each_other(self):
        r = unique("py-tasks")

        async def body(ch, locks):
            shared = AsyncMutex(locks, r, ttl=10)
            inside, tokens = [0], []

            async def work(m):
                for _ in range(5):
                    async with m:
                        inside[0] += 1
                        self.assertEqual(inside[0], 1, "two tasks inside")
                        tokens.append(m.fencing_token)
                        await asyncio.sleep(0.005)
                        inside[0] -= 1

            await asyncio.gather(*(work(m) for m in [shared, shared, AsyncMutex(locks, r, ttl=10), AsyncMutex(locks, r, ttl=10)]))
            return tokens

        tokens = self.run_async(body)
        self.assertEqual(len(tokens), 20)
        self.assertEqual(tokens, sorted(tokens))

    def test_renewal_timeouts_and_loss(self):
        r = unique("py-async")

        async def body(ch, locks):
            stub = locks_pb2_grpc.LockServiceStub(ch)
            async with AsyncMutex(locks, r, ttl=1) as m:
                token = m.fencing_token
                await asyncio.sleep(2.5)  # longer than the TTL: renewal keeps it
                self.assertFalse(m.lost)
                other = AsyncMutex(locks, r)
                start = time.monotonic()
                self.assertFalse(await other.acquire(timeout=0.5))
                elapsed = time.monotonic() - start
                self.assertGreaterEqual(elapsed, 0.5)
                self.assertLess(elapsed, 0.5 + SLACK)
                with self.assertRaises(LockTimeout):
                    async with AsyncMutex(locks, r, wait=0.2):
                        self.fail("entered a held lock")
                self.assertEqual((await stub.Get(locks_pb2.GetRequest(resource=r), timeout=5)).fencing_token, token)
            waiter = AsyncMutex(locks, r, ttl=1)
            self.assertTrue(await waiter.acquire(blocking=False))
            self.assertGreater(waiter.fencing_token, token)
            await stub.Release(locks_pb2.ReleaseRequest(resource=r, owner=waiter.owner), timeout=5)
            await stub.Acquire(locks_pb2.AcquireRequest(resource=r, owner="py-thief", ttl_ms=10_000), timeout=5)
            end = time.monotonic() + 10
            while not waiter.lost:
                self.assertLess(time.monotonic(), end, "loss not noticed")
                await asyncio.sleep(0.02)
            with self.assertRaises(LockLost):
                await waiter.release()

        self.run_async(body)

    def test_cancelled_wait_leaves_the_lock_to_others(self):
        r = unique("py-cancel")

        async def body(ch, locks):
            holder = AsyncMutex(locks, r)
            self.assertTrue(await holder.acquire())
            waiter = AsyncMutex(locks, r)
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.acquire(), 0.3)
            await holder.release()
            third = AsyncMutex(locks, r)
            self.assertTrue(await third.acquire(timeout=10))  # the cancelled waiter is not in line
            await third.release()

        self.run_async(body)

    def test_timed_out_waiters_leave_the_line(self):
        r = unique("py-sess")

        async def body(ch, locks):
            holder = AsyncMutex(locks, r, ttl=10)
            self.assertTrue(await holder.acquire())
            waiters = [AsyncMutex(locks, r) for _ in range(3)]
            start = time.monotonic()
            got = await asyncio.gather(*(w.acquire(timeout=0.3) for w in waiters))
            elapsed = time.monotonic() - start
            self.assertEqual(got, [False, False, False])
            self.assertGreaterEqual(elapsed, 0.3)
            self.assertLess(elapsed, 0.3 + SLACK)
            await holder.release()
            # None of the timed-out waiters holds it or stands in line: a newcomer gets it at once.
            newcomer = AsyncMutex(locks, r)
            self.assertTrue(await newcomer.acquire(blocking=False))
            await newcomer.release()

        self.run_async(body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
