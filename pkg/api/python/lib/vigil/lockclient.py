"""Mutexes on Vigil's lock service, with background renewal, fencing tokens and deadlines.

What ``pkg/lockclient`` gives Go callers, for Python::

    import grpc
    from vigil.lockclient import Mutex

    channel = grpc.insecure_channel("127.0.0.1:7002")
    with Mutex(channel, "nightly-report", ttl=10, wait=30) as m:
        store.write(data, fencing_token=m.fencing_token)  # the store refuses smaller tokens
        m.check()                                          # raises LockLost once the hold is gone

``Mutex`` waits for the lock in the service's first-come-first-served line (woken by the
release, never polling), renews the lease every third of its TTL in a background thread, and
releases it on exit. ``AsyncMutex`` does the same on ``grpc.aio`` with ``async with`` and a
renewal task. Both are shaped like ``threading.Lock`` (``acquire(blocking=True, timeout=-1)``,
``release()``, ``locked()``), and one mutex object shared by several threads (or tasks)
excludes them from each other too.

Every call to the service carries a deadline: ``acquire`` honours its ``timeout`` (within
50 ms for the answer; it waits no longer than ``call_timeout`` for an answer when it does not
wait for the lock), renewals and releases take at most ``call_timeout`` (default 5 s). A service that does not answer within the
deadline raises ``DeadlineExceeded``; one that cannot be reached is retried with backoff
(50 ms doubling to 1 s) for up to ``call_timeout`` and then raises ``Unavailable``. Refused
values raise ``InvalidArgument``; each carries the service's sentence (see ``vigil.errors``).

Both use LockService's unary calls: from Python, one ``LockService.Session`` stream per
channel was measured no faster for one caller and slower for several (threads must hand each
message to a feeding and a reading thread; grpc.aio sends one message of a stream at a time),
so the helpers keep the simpler path (pkg/api/python/README.md, examples/python/bench_locks.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from types import TracebackType
from typing import Any, Optional, Set, Type

import grpc

from vigil.errors import (
    DeadlineExceeded,
    InvalidArgument,
    LockLost,
    NotHeld,
    Unavailable,
    VigilError,
    from_rpc_error,
)
from vigil.locks.v1 import locks_pb2, locks_pb2_grpc

__all__ = [
    "Mutex",
    "AsyncMutex",
    "LockTimeout",
    "LockLost",
    "NotHeld",
    "InvalidArgument",
    "Unavailable",
    "DeadlineExceeded",
    "DEFAULT_TTL",
    "DEFAULT_CALL_TIMEOUT",
]

#: The lease a mutex asks for when none is given, in seconds (the service's own default).
DEFAULT_TTL = 30.0
#: How long one call to the service (a renewal, a release, an acquire that does not wait for
#: the lock) may take before it fails with ``DeadlineExceeded``, in seconds.
DEFAULT_CALL_TIMEOUT = 5.0

# The longest wait the service accepts in one acquire; a longer wait asks again.
_MAX_WAIT = 60.0
# A waiting acquire's call may outlive the wait it asks the service for by this much, so the
# service's "not acquired" normally arrives before the call's deadline does.
_ANSWER_MARGIN = 0.05
_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 1.0
# A mutex's renewal thread ends after this many seconds without a hold (the next hold starts
# another), so back-to-back holds share one thread and an idle mutex keeps none.
_IDLE = 2.0
# Failures worth sending again: the service (or its store) was unreachable or busy.
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED})


class LockTimeout(VigilError, TimeoutError):
    """``with Mutex(..., wait=s)`` did not get the lock within ``s`` seconds; ``holder`` is who
    held it at the last answer (``None`` when unknown)."""

    def __init__(self, details: str, holder: Optional[str] = None) -> None:
        super().__init__(details)
        self.holder = holder


def _code(err: grpc.RpcError) -> Optional[grpc.StatusCode]:
    return err.code() if callable(getattr(err, "code", None)) else None


def _check_timeouts(ttl: float, wait: Optional[float], call_timeout: float) -> None:
    # The service checks the TTL's range itself (and says so); these are the client's own.
    if not ttl > 0:
        raise InvalidArgument(f"ttl must be positive seconds, got {ttl!r}")
    if wait is not None and not wait >= 0:
        raise InvalidArgument(f"wait must be None or non-negative seconds, got {wait!r}")
    if not call_timeout > 0:
        raise InvalidArgument(f"call_timeout must be positive seconds, got {call_timeout!r}")


def _acquire_deadline(blocking: bool, timeout: float, now: float) -> Optional[float]:
    """The monotonic time acquire(blocking, timeout) gives up; None waits without end. Raises
    ValueError for the combinations threading.Lock refuses."""
    if not blocking:
        if timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        return now
    if timeout == -1:
        return None
    if timeout < 0:
        raise ValueError("timeout value must be a non-negative number")
    return now + timeout


def _plan(deadline: Optional[float], now: float, call_timeout: float) -> "tuple[float, float, bool]":
    """The lock wait to ask the service for and the call's deadline, both in seconds from now,
    and whether that deadline is the caller's own: the call outlives the caller's deadline by
    at most _ANSWER_MARGIN, and with no deadline it waits in chunks of the service's longest
    wait, each with call_timeout to be answered."""
    if deadline is None:
        return _MAX_WAIT, _MAX_WAIT + call_timeout, False
    remaining = deadline - now
    if remaining <= 0:  # not waiting for the lock: one call, answered within call_timeout
        return 0.0, call_timeout, False
    if remaining > _MAX_WAIT:
        return _MAX_WAIT, _MAX_WAIT + call_timeout, False
    return remaining, remaining + _ANSWER_MARGIN, True


class _Hold:
    """One hold of a lock: its fencing token, when its lease ends by the client's clock
    (counted from when the acquire was sent, so never later than the service's), and whether
    it was lost."""

    __slots__ = ("token", "expiry", "lost", "why", "retry_at", "backoff")

    def __init__(self, token: int, expiry: float) -> None:
        self.token = token
        self.expiry = expiry
        self.lost = False
        self.why = ""
        self.retry_at: Optional[float] = None  # after a failed renewal: when to try again
        self.backoff = _FIRST_BACKOFF


class _MutexBase:
    """What Mutex and AsyncMutex share: identity, options, the current hold, the requests."""

    def __init__(self, resource: str, owner: Optional[str], ttl: float, wait: Optional[float], call_timeout: float) -> None:
        _check_timeouts(ttl, wait, call_timeout)
        self._resource = resource
        self._owner = owner if owner else str(uuid.uuid4())
        self._ttl = float(ttl)
        self._ttl_ms = max(1, int(round(self._ttl * 1000)))
        self._wait = wait
        self._call_timeout = float(call_timeout)
        self._hold: Optional[_Hold] = None
        self._holder: Optional[str] = None  # who held the lock at the last refusal

    @property
    def resource(self) -> str:
        """The lock's name."""
        return self._resource

    @property
    def owner(self) -> str:
        """Who this mutex holds the lock as: the owner given, or a random UUID. Two mutexes with
        the same owner do NOT exclude each other (re-acquiring is idempotent for an owner)."""
        return self._owner

    @property
    def ttl(self) -> float:
        """The lease in seconds, renewed every third of it while held."""
        return self._ttl

    @property
    def fencing_token(self) -> Optional[int]:
        """The fencing token of the current hold, ``None`` when not held. It grows with every new
        holder of the resource: send it with every write, and have the storage refuse a write
        whose token is smaller than one it has seen."""
        h = self._hold
        return h.token if h is not None else None

    @property
    def lost(self) -> bool:
        """True once the current hold ended without a release (a renewal was refused, or the
        lease ran out before a renewal got through): the holder must stop writing. False when
        not held."""
        h = self._hold
        return h is not None and (h.lost or time.monotonic() >= h.expiry)

    def locked(self) -> bool:
        """True while this mutex holds the lock (even if the hold was lost: release it)."""
        return self._hold is not None

    def check(self) -> None:
        """Raise ``LockLost`` when the hold was lost and ``NotHeld`` when nothing is held: call it
        before a write that must happen under the lock."""
        h = self._hold
        if h is None:
            raise NotHeld(f"lock {self._resource!r} is not held by {self._owner!r}")
        if self.lost:
            raise LockLost(self._lost_sentence(h))

    def _lost_sentence(self, h: _Hold) -> str:
        why = h.why or "its lease ran out before a renewal got through"
        return f"lock {self._resource!r} (fencing token {h.token}) was lost: {why}"

    def _acquire_request(self, wait: float) -> locks_pb2.AcquireRequest:
        req = locks_pb2.AcquireRequest(resource=self._resource, owner=self._owner, ttl_ms=self._ttl_ms)
        if wait > 0:
            req.wait_ms = max(1, int(wait * 1000))
        return req

    def _release_request(self, token: Optional[int] = None) -> locks_pb2.ReleaseRequest:
        """A release of the hold with ``token`` (fenced: a release that arrives late frees that
        hold or nothing, never a later hold of the same owner), or of whatever hold the owner
        has when the token is not known (a grant that crossed a deadline)."""
        return locks_pb2.ReleaseRequest(resource=self._resource, owner=self._owner, fencing_token=token)

    def _renew_request(self, token: int) -> locks_pb2.RenewRequest:
        """A renewal of the hold with ``token``, fenced as a release is."""
        return locks_pb2.RenewRequest(resource=self._resource, owner=self._owner, ttl_ms=self._ttl_ms, fencing_token=token)

    def _timeout_error(self) -> LockTimeout:
        who = f" (held by {self._holder!r})" if self._holder else ""
        return LockTimeout(f"lock {self._resource!r} not acquired within {self._wait:g} s{who}", self._holder)

    def _renewed(self, h: _Hold, res: locks_pb2.RenewResponse, sent: float) -> Optional[float]:
        """Records a renewal's answer; the pause before the next renewal, or None when lost."""
        if res.renewed:
            h.expiry = sent + self._ttl
            return self._ttl / 3
        h.lost, h.why = True, "a renewal was refused: the lease had ended and someone else may hold the lock"
        return None

    def _renew_failed(self, h: _Hold, err: grpc.RpcError, backoff: float) -> Optional[float]:
        """Records a failed renewal; the pause before trying again, or None when the lease ran
        out meanwhile (lost)."""
        left = h.expiry - time.monotonic()
        if left <= 0:
            h.lost = True
            h.why = f"the lease ran out while renewals failed ({from_rpc_error(err, 'renew')})"
            return None
        return min(backoff, left)

    def _released(self, h: _Hold, res: Optional[locks_pb2.ReleaseResponse], retried: bool) -> None:
        """Raises LockLost when the hold had been lost, or the service said this owner did not
        hold the lock (unless an earlier attempt may have released it already)."""
        if h.lost or time.monotonic() >= h.expiry:
            raise LockLost(self._lost_sentence(h))
        if res is not None and not res.released and not retried:
            raise LockLost(f"lock {self._resource!r} (fencing token {h.token}) was no longer held by {self._owner!r} at release")

    def _give_back(self) -> None:
        """Releases, without waiting for the answer, a grant that may have crossed a deadline."""
        raise NotImplementedError

    def _start_hold(self, token: int, expiry: float) -> None:
        """Starts a hold and its renewal."""
        raise NotImplementedError

    def _release_failed(self, err: grpc.RpcError, timeout: float, deadline: float, backoff: float) -> None:
        """Raises the failure of a release call unless it is worth trying again after backoff."""
        if _code(err) not in _TRANSIENT or time.monotonic() + backoff >= deadline:
            raise from_rpc_error(err, f"release {self._resource!r}: no answer within {timeout:.3g} s") from None

    def __repr__(self) -> str:
        state = "unlocked" if self._hold is None else ("lost" if self.lost else f"held, token {self._hold.token}")
        return f"<{type(self).__name__} {self._resource!r} owner={self._owner!r} {state}>"


class _AcquireTries:
    """The calls of one acquire: what each asks for, and after its answer or failure whether to
    ask again. Mutex and AsyncMutex make the calls and the pauses, each its own way; the mutex
    gives a grant back with ``_give_back()`` and starts a hold with ``_start_hold``."""

    def __init__(self, m: _MutexBase, deadline: Optional[float]) -> None:
        self._m = m
        self._deadline = deadline
        self._backoff = _FIRST_BACKOFF
        self._failing_since: Optional[float] = None  # the first of the failures in a row
        self._sent = 0.0  # when the last call was sent
        self._call_timeout = 0.0
        self._callers = False  # the last call's timeout is the caller's own deadline

    def next_call(self) -> "tuple[float, float]":
        """The lock wait to ask for and the timeout of a call sent now, in seconds."""
        self._sent = time.monotonic()
        wait, self._call_timeout, self._callers = _plan(self._deadline, self._sent, self._m._call_timeout)
        return wait, self._call_timeout

    def failed(self, err: grpc.RpcError) -> Optional[float]:
        """After a failed call: the pause before the next, or None when the caller's timeout
        passed (not acquired). Raises when the failure is final."""
        m, what = self._m, f"acquire {self._m._resource!r}"
        code, now = _code(err), time.monotonic()
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
            # A grant may have crossed the deadline: give it back, without waiting.
            m._give_back()
            if self._callers:  # the caller's timeout, not a silent service
                return None
            raise from_rpc_error(err, f"{what}: no answer within {self._call_timeout:.3g} s") from None
        if code not in _TRANSIENT:
            raise from_rpc_error(err, what) from None
        if self._failing_since is None:
            self._failing_since = self._sent
        pause = self._backoff
        if now + pause - self._failing_since > m._call_timeout or (self._callers and now + pause >= self._deadline):
            raise from_rpc_error(err, what) from None
        self._backoff = min(2 * pause, _MAX_BACKOFF)
        return pause

    def answered(self, res: locks_pb2.AcquireResponse) -> Optional[bool]:
        """After an answer: True when it granted the lock (the hold started), False when the
        caller's timeout passed, None to ask again."""
        m = self._m
        if res.acquired:
            m._start_hold(res.fencing_token, self._sent + m._ttl)
            return True
        m._holder = res.holder if res.HasField("holder") else None
        self._backoff, self._failing_since = _FIRST_BACKOFF, None
        if self._deadline is not None and self._deadline - time.monotonic() <= 0.001:
            return False
        return None


class Mutex(_MutexBase):
    """A lock on the service, held by one owner, renewed in the background while held.

    ``channel`` is a ``grpc.Channel`` to the lock service (the caller owns and closes it).
    ``owner`` defaults to a random UUID; ``ttl`` is the lease in seconds (100 ms through 1 h,
    default 30 s), renewed every ``ttl/3``; ``wait`` is how long ``with`` waits for the lock
    before raising ``LockTimeout`` (``None``: until acquired); ``call_timeout`` bounds every
    call that does not wait for the lock (default 5 s).

    Shared by several threads, one mutex excludes them like a ``threading.Lock`` (the first
    takes it, the others wait in ``acquire``); mutexes with different owners exclude each other
    across threads, processes and machines.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        resource: str,
        owner: Optional[str] = None,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        super().__init__(resource, owner, ttl, wait, call_timeout)
        self._stub = locks_pb2_grpc.LockServiceStub(channel)
        self._local = threading.Lock()  # held from a successful acquire to its release
        self._cond = threading.Condition()  # guards _hold and _renewing for the renewer
        self._renewing = False  # a renewal thread runs
        self._giving_back: Optional[grpc.Future] = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock: True when held, False when ``timeout`` seconds passed (or, with
        ``blocking=False``, the lock was held by another owner) first.

        Waits in the service's line for the lock, in arrival order, for up to ``timeout``
        seconds (``-1``: without end); the call returns within ``timeout`` plus 50 ms even when
        the service stops answering. A non-blocking acquire asks once and waits up to ``call_timeout`` for
        the answer. Raises ``InvalidArgument`` for a name or TTL the service refuses,
        ``Unavailable`` when the service stayed unreachable for ``call_timeout``, and
        ``DeadlineExceeded`` when it did not answer a call without a lock wait in time.
        """
        deadline = _acquire_deadline(blocking, timeout, time.monotonic())
        if deadline is None:
            got = self._local.acquire()
        else:
            got = self._local.acquire(blocking, max(0.0, deadline - time.monotonic()) if blocking else -1)
        if not got:
            return False
        ok = False
        try:
            ok = self._acquire(deadline)
        finally:
            if not ok:  # not acquired, or failed: the local lock goes too
                self._local.release()
        return ok

    def _acquire(self, deadline: Optional[float]) -> bool:
        self._settle_give_back()
        tries = _AcquireTries(self, deadline)
        while True:
            wait, call_timeout = tries.next_call()
            try:
                res = self._stub.Acquire(self._acquire_request(wait), timeout=call_timeout)
            except grpc.RpcError as err:
                pause = tries.failed(err)
                if pause is None:
                    return False
                time.sleep(pause)
                continue
            got = tries.answered(res)
            if got is not None:
                return got

    def _give_back(self) -> None:
        """Releases, without waiting, a grant that may have crossed a deadline; the next acquire
        waits for it first, so it cannot release that acquire's grant."""
        try:
            self._giving_back = self._stub.Release.future(self._release_request(), timeout=self._call_timeout)
        except (grpc.RpcError, ValueError):  # the channel is closed: the lease ends on its own
            pass

    def _settle_give_back(self) -> None:
        fut, self._giving_back = self._giving_back, None
        if fut is not None:
            try:
                fut.result()  # bounded by the call's own deadline
            except (grpc.RpcError, grpc.FutureCancelledError):
                pass

    def _start_hold(self, token: int, expiry: float) -> None:
        with self._cond:
            self._hold = _Hold(token, expiry)
            if self._renewing:
                self._cond.notify()
                return
            self._renewing = True
        threading.Thread(target=self._renew, name=f"vigil-renew-{self._resource}", daemon=True).start()

    def _renew(self) -> None:
        """Renews each hold every ttl/3 until it is released or lost; one thread serves the
        mutex's holds one after the other, and ends after _IDLE seconds without one."""
        with self._cond:
            while True:
                h = self._hold
                if h is None or h.lost:
                    if not self._cond.wait_for(lambda: self._hold is not h, timeout=_IDLE):
                        self._renewing = False
                        return
                    continue
                due = h.expiry - self._ttl * 2 / 3 if h.retry_at is None else h.retry_at
                if self._cond.wait_for(lambda: self._hold is not h, timeout=max(0.0, due - time.monotonic())):
                    continue  # released (or re-acquired) meanwhile
                sent = time.monotonic()
                left = h.expiry - sent
                if left <= 0:
                    h.lost = True
                    continue
                self._cond.release()
                try:
                    res: Optional[locks_pb2.RenewResponse] = self._stub.Renew(self._renew_request(h.token), timeout=min(self._call_timeout, left))
                    err: Optional[grpc.RpcError] = None
                except grpc.RpcError as e:
                    res, err = None, e
                finally:
                    self._cond.acquire()
                if self._hold is not h:
                    continue  # released while the renewal was in flight: its answer is moot
                if res is not None:
                    h.retry_at, h.backoff = None, _FIRST_BACKOFF
                    self._renewed(h, res, sent)
                else:
                    pause = self._renew_failed(h, err, h.backoff)
                    h.retry_at = None if pause is None else time.monotonic() + pause
                    h.backoff = min(2 * h.backoff, _MAX_BACKOFF)

    def release(self, timeout: Optional[float] = None) -> None:
        """Give the lock back and stop renewing it; the next waiter gets it at once.

        Waits up to ``timeout`` seconds (default ``call_timeout``) for the service, retrying an
        unreachable one with backoff meanwhile. Raises ``NotHeld`` when this mutex holds
        nothing, ``LockLost`` when the hold had been lost before the release (the lock is free
        for this mutex again either way), and ``Unavailable`` or ``DeadlineExceeded`` when the
        release did not get through (the lease then ends on its own after the TTL).
        """
        with self._cond:
            h = self._hold
            if h is None:
                raise NotHeld(f"lock {self._resource!r} is not held by {self._owner!r}")
            self._hold = None  # renewal stops; the release does not wait for the renewer
            self._cond.notify()
        try:
            res, retried = self._release(self._call_timeout if timeout is None else timeout, h.token)
        finally:
            self._local.release()
        self._released(h, res, retried)

    def _release(self, timeout: float, token: int) -> "tuple[locks_pb2.ReleaseResponse, bool]":
        deadline = time.monotonic() + timeout
        backoff, retried = _FIRST_BACKOFF, False
        while True:
            try:
                return self._stub.Release(self._release_request(token), timeout=max(0.001, deadline - time.monotonic())), retried
            except grpc.RpcError as err:
                self._release_failed(err, timeout, deadline, backoff)
                time.sleep(backoff)
                backoff, retried = min(2 * backoff, _MAX_BACKOFF), True

    def __enter__(self) -> "Mutex":
        if not self.acquire(timeout=-1 if self._wait is None else self._wait):
            raise self._timeout_error()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            self.release()
        except VigilError:
            if exc_type is None:
                raise
            # The block's own exception is the one to see; the lease ends on its own.


class AsyncMutex(_MutexBase):
    """``Mutex`` on ``grpc.aio``: ``async with AsyncMutex(channel, "reports") as m: ...``.

    ``channel`` is a ``grpc.aio.Channel`` (created in the running event loop); the renewal is a
    task of that loop. The options, timeouts and exceptions are Mutex's. Shared by several
    tasks, one AsyncMutex excludes them like an ``asyncio.Lock``.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        resource: str,
        owner: Optional[str] = None,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        super().__init__(resource, owner, ttl, wait, call_timeout)
        self._stub = locks_pb2_grpc.LockServiceStub(channel)
        self._local = asyncio.Lock()
        self._renewer: Optional["asyncio.Task[None]"] = None
        self._background: Set["asyncio.Future[Any]"] = set()  # give-backs in flight

    async def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """``Mutex.acquire``, awaited: True when held, False when ``timeout`` passed first."""
        deadline = _acquire_deadline(blocking, timeout, time.monotonic())
        if not await self._acquire_local(deadline):
            return False
        ok = False
        try:
            ok = await self._acquire(deadline)
        finally:
            if not ok:  # not acquired, or failed: the local lock goes too
                self._local.release()
        return ok

    async def _acquire_local(self, deadline: Optional[float]) -> bool:
        if deadline is None:
            await self._local.acquire()
            return True
        if deadline <= time.monotonic():  # not blocking
            if self._local.locked():
                return False
            await self._local.acquire()
            return True
        # asyncio.Lock.acquire has no timeout; wait_for may drop a lock acquired as it times out
        # (before Python 3.12), so the wait is a task we settle ourselves.
        task = asyncio.ensure_future(self._local.acquire())
        try:
            await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
        except asyncio.CancelledError:
            await self._settle(task, keep=False)
            raise
        return await self._settle(task, keep=True)

    async def _settle(self, task: "asyncio.Task[bool]", keep: bool) -> bool:
        """Ends a local lock wait: True when it got the lock (kept when keep, else released)."""
        if not task.done():
            task.cancel()
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            return False
        if not keep:
            self._local.release()
        return keep

    async def _acquire(self, deadline: Optional[float]) -> bool:
        if self._background:  # a give-back must not release this acquire's grant
            await asyncio.wait(set(self._background))  # each bounded by its call's deadline
        tries = _AcquireTries(self, deadline)
        while True:
            wait, call_timeout = tries.next_call()
            try:
                res = await self._stub.Acquire(self._acquire_request(wait), timeout=call_timeout)
            except asyncio.CancelledError:
                self._give_back()
                raise
            except grpc.RpcError as err:
                pause = tries.failed(err)
                if pause is None:
                    return False
                await asyncio.sleep(pause)
                continue
            got = tries.answered(res)
            if got is not None:
                return got

    def _give_back(self) -> None:
        """Releases, in the background, a grant that may have crossed a deadline or a cancel."""

        async def give_back() -> None:
            try:
                await self._stub.Release(self._release_request(), timeout=self._call_timeout)
            except grpc.RpcError:  # the lease ends on its own
                pass

        try:
            fut = asyncio.ensure_future(give_back())
        except RuntimeError:  # no running loop
            return
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _start_hold(self, token: int, expiry: float) -> None:
        h = _Hold(token, expiry)
        self._hold = h
        self._renewer = asyncio.ensure_future(self._renew(h))

    async def _renew(self, h: _Hold) -> None:
        pause: Optional[float] = self._ttl / 3
        backoff = _FIRST_BACKOFF
        while pause is not None:
            await asyncio.sleep(pause)
            sent = time.monotonic()
            left = h.expiry - sent
            if left <= 0:
                h.lost = True
                return
            try:
                res = await self._stub.Renew(self._renew_request(h.token), timeout=min(self._call_timeout, left))
            except grpc.RpcError as err:
                pause = self._renew_failed(h, err, backoff)
                backoff = min(2 * backoff, _MAX_BACKOFF)
                continue
            pause, backoff = self._renewed(h, res, sent), _FIRST_BACKOFF

    async def release(self, timeout: Optional[float] = None) -> None:
        """``Mutex.release``, awaited."""
        h, renewer = self._hold, self._renewer
        if h is None:
            raise NotHeld(f"lock {self._resource!r} is not held by {self._owner!r}")
        self._hold, self._renewer = None, None
        if renewer is not None:
            renewer.cancel()
        try:
            res, retried = await self._release(self._call_timeout if timeout is None else timeout, h.token)
        finally:
            self._local.release()
        self._released(h, res, retried)

    async def _release(self, timeout: float, token: int) -> "tuple[locks_pb2.ReleaseResponse, bool]":
        deadline = time.monotonic() + timeout
        backoff, retried = _FIRST_BACKOFF, False
        while True:
            try:
                return await self._stub.Release(self._release_request(token), timeout=max(0.001, deadline - time.monotonic())), retried
            except grpc.RpcError as err:
                self._release_failed(err, timeout, deadline, backoff)
                await asyncio.sleep(backoff)
                backoff, retried = min(2 * backoff, _MAX_BACKOFF), True

    async def __aenter__(self) -> "AsyncMutex":
        if not await self.acquire(timeout=-1 if self._wait is None else self._wait):
            raise self._timeout_error()
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            await self.release()
        except VigilError:
            if exc_type is None:
                raise
