"""Retrying a call within its deadline: shared by the domain helpers (not public)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import grpc

from vigil.errors import VigilError, from_rpc_error

T = TypeVar("T")

_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


def call_with_retries(what: str, timeout: float, attempt: Callable[[float], T]) -> T:
    """Runs attempt(seconds left) until it succeeds, fails for good, or timeout passes; an
    unreachable service is tried again after 50 ms, doubling to 1 s. Failures become
    vigil.errors exceptions. Raises Retried(err) instead when a failure follows an attempt
    that may have gone through."""
    deadline = time.monotonic() + timeout
    backoff, tries = 0.05, 0
    while True:
        tries += 1
        try:
            return attempt(max(0.001, deadline - time.monotonic()))
        except grpc.RpcError as err:
            code = err.code() if callable(getattr(err, "code", None)) else None
            if code in _TRANSIENT and time.monotonic() + backoff < deadline:
                time.sleep(backoff)
                backoff = min(2 * backoff, 1.0)
                continue
            e = from_rpc_error(err, f"{what}: no answer within {timeout:g} s" if code == grpc.StatusCode.DEADLINE_EXCEEDED else what)
            if tries > 1:
                raise Retried(e) from None
            raise e from None


class Retried(Exception):
    """A call failed after an attempt that may have gone through; err is its exception."""

    def __init__(self, err: VigilError) -> None:
        super().__init__(str(err))
        self.err = err
