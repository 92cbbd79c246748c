"""Reservations with deadlines, typed errors and safe retries.

::

    import grpc
    from vigil.reservationclient import Reservations

    reservations = Reservations(grpc.insecure_channel("127.0.0.1:7001"))
    r = reservations.hold("seat-12a", ttl=60)   # held for 60 s, then it expires on its own
    ...
    reservations.confirm("seat-12a")            # FailedPrecondition if it expired meanwhile

Every call waits at most ``timeout`` seconds (default 5 s, per client or per call) and raises
``vigil.errors.DeadlineExceeded`` past it. A service that cannot be reached is tried again with
backoff within that time; a hold whose first attempt may have gone through is read before it
is sent again (a hold sent again would reset it), and a confirm or release whose first attempt
may have gone through before the connection broke is not reported as a conflict when the
reservation ended up in the state asked for. Errors carry the service's sentence (see ``vigil.errors``).
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

import grpc

from vigil._retry import Retried, call_with_retries
from vigil.errors import FailedPrecondition
from vigil.reservations.v1 import reservations_pb2, reservations_pb2_grpc

__all__ = ["Reservations", "DEFAULT_TIMEOUT"]

T = TypeVar("T")

#: How long a call may take when no timeout is given, in seconds.
DEFAULT_TIMEOUT = 5.0


class Reservations:
    """The reservation service's calls, each with a deadline.

    ``channel`` is a ``grpc.Channel`` to the reservation service (the caller owns and closes
    it); ``timeout`` is the default deadline of each call in seconds.
    """

    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._stub = reservations_pb2_grpc.ReservationServiceStub(channel)
        self._timeout = timeout

    def hold(self, reservation_id: str, ttl: int, *, timeout: Optional[float] = None) -> reservations_pb2.Reservation:
        """Holds a reservation for ``ttl`` whole seconds (5 through 3600) and returns it (status
        "held"). Holding one that exists resets it: a new hold with a new expiry. Raises
        ``InvalidArgument`` for a TTL or name the service refuses."""
        req = reservations_pb2.CreateReservationRequest(reservation_id=reservation_id, ttl_seconds=int(ttl))
        get = reservations_pb2.GetReservationRequest(reservation_id=reservation_id)
        sent = False

        def attempt(t: float) -> reservations_pb2.Reservation:
            nonlocal sent
            if sent:
                # The create sent before may have gone through with its answer lost (UNAVAILABLE:
                # outcome unknown), and a create resets a hold, even a confirmed one: read first,
                # and create again only when no hold or confirmation is there.
                got = self._stub.GetReservation(get, timeout=t).reservation
                if got.status in ("held", "confirmed"):
                    return got
            sent = True
            return self._stub.CreateReservation(req, timeout=t).reservation

        return self._run(f"hold {reservation_id!r}", timeout, attempt)

    def get(self, reservation_id: str, *, timeout: Optional[float] = None) -> reservations_pb2.Reservation:
        """Returns the reservation; one never created has status "missing"."""
        req = reservations_pb2.GetReservationRequest(reservation_id=reservation_id)
        return self._run(f"get {reservation_id!r}", timeout, lambda t: self._stub.GetReservation(req, timeout=t).reservation)

    def confirm(self, reservation_id: str, *, timeout: Optional[float] = None) -> reservations_pb2.Reservation:
        """Moves a held reservation to "confirmed" and returns it. Raises ``FailedPrecondition``
        (with the service's sentence) when it is not held: expired, released, missing."""
        req = reservations_pb2.ConfirmReservationRequest(reservation_id=reservation_id)
        return self._transition("confirm", "confirmed", reservation_id, timeout,
                                lambda t: self._stub.ConfirmReservation(req, timeout=t).reservation)

    def release(self, reservation_id: str, *, timeout: Optional[float] = None) -> reservations_pb2.Reservation:
        """Moves a held reservation to "released" and returns it. Raises ``FailedPrecondition``
        when it is not held."""
        req = reservations_pb2.ReleaseReservationRequest(reservation_id=reservation_id)
        return self._transition("release", "released", reservation_id, timeout,
                                lambda t: self._stub.ReleaseReservation(req, timeout=t).reservation)

    def _run(self, what: str, timeout: Optional[float], attempt: Callable[[float], T]) -> T:
        try:
            return call_with_retries(what, self._timeout if timeout is None else timeout, attempt)
        except Retried as r:
            raise r.err from None

    def _transition(self, verb: str, status: str, reservation_id: str, timeout: Optional[float],
                    attempt: Callable[[float], reservations_pb2.Reservation]) -> reservations_pb2.Reservation:
        t = self._timeout if timeout is None else timeout
        start = time.monotonic()
        try:
            return call_with_retries(f"{verb} {reservation_id!r}", t, attempt)
        except Retried as r:
            if not isinstance(r.err, FailedPrecondition):
                raise r.err from None
            # An earlier attempt may have made the transition before its answer was lost.
            got = self.get(reservation_id, timeout=max(0.001, t - (time.monotonic() - start)))
            if got.status == status:
                return got
            raise r.err from None
