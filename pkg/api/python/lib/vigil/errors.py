"""The exceptions Vigil's Python helpers raise.

Every helper turns a failed gRPC call into one of these, keeping the service's sentence (the
status details, written for a person to act on) as the exception's message and in ``details``::

    try:
        reservations.confirm("seat-12a")
    except vigil.errors.FailedPrecondition as e:
        print(e.details)  # the service's sentence, e.g. why the reservation cannot be confirmed

``VigilError`` is the base of all of them; catching it catches any failed helper call. The
classes also derive from the built-in exception a Python caller would reach for
(``ValueError``, ``ConnectionError``, ``TimeoutError``, ``RuntimeError``), so code that already
catches those keeps working.
"""

from __future__ import annotations

from typing import Optional

import grpc

__all__ = [
    "VigilError",
    "InvalidArgument",
    "Unavailable",
    "DeadlineExceeded",
    "FailedPrecondition",
    "NotFound",
    "LockLost",
    "NotHeld",
    "from_rpc_error",
]


class VigilError(Exception):
    """A helper call failed.

    ``code`` is the gRPC status code of the failed call (``None`` for failures the helper
    detected itself, such as a lock lost to expiry) and ``details`` the service's sentence.
    """

    def __init__(self, details: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(details)
        self.details = details
        self.code = code


class InvalidArgument(VigilError, ValueError):
    """The service refused the request's values (INVALID_ARGUMENT or OUT_OF_RANGE): a name that
    breaks the naming rule, a TTL outside its range, an empty message body. Sending it again
    fails again."""


class Unavailable(VigilError, ConnectionError):
    """The service could not be reached or could not reach its store (UNAVAILABLE, or
    RESOURCE_EXHAUSTED when a limit was hit), and the helper's retries, if any, ran out. Worth
    trying again later."""


class DeadlineExceeded(VigilError, TimeoutError):
    """The service did not answer within the call's deadline (DEADLINE_EXCEEDED)."""


class FailedPrecondition(VigilError):
    """The request does not fit the current state (FAILED_PRECONDITION): confirming a
    reservation that already expired, for example."""


class NotFound(VigilError, LookupError):
    """The service has no such thing (NOT_FOUND)."""


class LockLost(VigilError):
    """The hold on a lock ended without being released: a renewal was refused (someone else
    holds the lock now) or the lease ran out while the service could not be reached. Whatever
    the holder wrote after losing the lock may have raced with the next holder; the fencing
    token is how the storage refuses those writes."""


class NotHeld(VigilError, RuntimeError):
    """Releasing a mutex that does not hold its lock (never acquired, or already released), as
    ``threading.Lock.release`` raises ``RuntimeError`` for an unlocked lock."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
}


def from_rpc_error(err: grpc.RpcError, what: str = "") -> VigilError:
    """The typed exception for a failed gRPC call (sync or ``grpc.aio``), carrying the service's
    sentence; ``what`` names the call when the failure has no sentence of its own (a deadline
    the client enforced, a connection refused before the service said anything)."""
    code = err.code() if callable(getattr(err, "code", None)) else None
    details = (err.details() if callable(getattr(err, "details", None)) else None) or ""
    if not details or details in ("Deadline Exceeded", "Deadline exceeded"):
        name = code.name if code is not None else "failed"
        details = f"{what}: {name}" if what else name
    return _BY_CODE.get(code, VigilError)(details, code)
