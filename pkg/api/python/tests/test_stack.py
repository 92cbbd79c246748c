"""Drives a running Vigil (`vigil dev`) over gRPC with the generated Python client.

deploy/python-client-test.sh starts the stack, installs the package and runs this file. The
services' addresses come from the same environment variables the operator CLI reads, with the
same defaults (vigil dev's ports).
"""

import os
import unittest
import uuid

import grpc

from vigil.chat.v1 import chat_pb2, chat_pb2_grpc
from vigil.locks.v1 import locks_pb2, locks_pb2_grpc
from vigil.reservations.v1 import reservations_pb2, reservations_pb2_grpc

RESERVATIONS = os.environ.get("VIGIL_RESERVATIONS_ADDR", "127.0.0.1:7001")
LOCKS = os.environ.get("VIGIL_LOCKS_ADDR", "127.0.0.1:7002")
CHAT = os.environ.get("VIGIL_CHAT_ADDR", "127.0.0.1:7003")
TIMEOUT = 10  # seconds per call: an upper bound on a hung call, not on how fast the stack is


def unique(prefix):
    """A name no other run uses (lowercase letters, digits and dashes: every domain's name rule)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def channel(addr):
    ch = grpc.insecure_channel(addr)
    grpc.channel_ready_future(ch).result(timeout=60)
    return ch


class ReservationsTest(unittest.TestCase):
    def setUp(self):
        self.ch = channel(RESERVATIONS)
        self.addCleanup(self.ch.close)
        self.stub = reservations_pb2_grpc.ReservationServiceStub(self.ch)

    def test_create_then_read(self):
        rid = unique("py-seat")
        created = self.stub.CreateReservation(
            reservations_pb2.CreateReservationRequest(reservation_id=rid, ttl_seconds=60), timeout=TIMEOUT
        ).reservation
        self.assertEqual(created.reservation_id, rid)
        self.assertEqual(created.status, "held")
        self.assertTrue(created.HasField("expires_at"))
        self.assertEqual(created.expires_at - created.created_at, 60_000)
        self.assertEqual(created.alarm_at, created.expires_at)

        got = self.stub.GetReservation(
            reservations_pb2.GetReservationRequest(reservation_id=rid), timeout=TIMEOUT
        ).reservation
        self.assertEqual(got, created)

    def test_never_created_is_missing(self):
        got = self.stub.GetReservation(
            reservations_pb2.GetReservationRequest(reservation_id=unique("py-none")), timeout=TIMEOUT
        ).reservation
        self.assertEqual(got.status, "missing")
        self.assertFalse(got.HasField("alarm_at"))

    def test_bad_ttl_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.CreateReservation(
                reservations_pb2.CreateReservationRequest(reservation_id=unique("py-bad"), ttl_seconds=0),
                timeout=TIMEOUT,
            )
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("ttl", caught.exception.details().lower())


class LocksTest(unittest.TestCase):
    def setUp(self):
        self.ch = channel(LOCKS)
        self.addCleanup(self.ch.close)
        self.stub = locks_pb2_grpc.LockServiceStub(self.ch)

    def test_acquire_then_release(self):
        resource = unique("py-report")
        got = self.stub.Acquire(
            locks_pb2.AcquireRequest(resource=resource, owner="py-worker-1", ttl_ms=10_000), timeout=TIMEOUT
        )
        self.assertTrue(got.acquired)
        self.assertGreater(got.fencing_token, 0)

        held = self.stub.Get(locks_pb2.GetRequest(resource=resource), timeout=TIMEOUT)
        self.assertTrue(held.held)
        self.assertEqual(held.owner, "py-worker-1")
        self.assertEqual(held.fencing_token, got.fencing_token)

        other = self.stub.Acquire(locks_pb2.AcquireRequest(resource=resource, owner="py-worker-2"), timeout=TIMEOUT)
        self.assertFalse(other.acquired)
        self.assertEqual(other.holder, "py-worker-1")

        # Only the owner releases it.
        wrong = self.stub.Release(locks_pb2.ReleaseRequest(resource=resource, owner="py-worker-2"), timeout=TIMEOUT)
        self.assertFalse(wrong.released)
        released = self.stub.Release(locks_pb2.ReleaseRequest(resource=resource, owner="py-worker-1"), timeout=TIMEOUT)
        self.assertTrue(released.released)

        free = self.stub.Get(locks_pb2.GetRequest(resource=resource), timeout=TIMEOUT)
        self.assertFalse(free.held)

        # The next holder gets a larger fencing token.
        again = self.stub.Acquire(locks_pb2.AcquireRequest(resource=resource, owner="py-worker-2"), timeout=TIMEOUT)
        self.assertTrue(again.acquired)
        self.assertGreater(again.fencing_token, got.fencing_token)
        self.stub.Release(locks_pb2.ReleaseRequest(resource=resource, owner="py-worker-2"), timeout=TIMEOUT)


class ChatTest(unittest.TestCase):
    def setUp(self):
        self.ch = channel(CHAT)
        self.addCleanup(self.ch.close)
        self.stub = chat_pb2_grpc.ChatServiceStub(self.ch)

    def test_post_then_read(self):
        room = unique("py-room")
        bodies = ["hello from python", "second message"]
        posted = [
            self.stub.PostMessage(
                chat_pb2.PostMessageRequest(room=room, user_id="py-u1", username="ann", body=body), timeout=TIMEOUT
            ).message
            for body in bodies
        ]
        self.assertEqual([m.body for m in posted], bodies)
        self.assertLess(posted[0].id, posted[1].id)

        listed = self.stub.ListMessages(chat_pb2.ListMessagesRequest(room=room), timeout=TIMEOUT)
        self.assertEqual([(m.id, m.user, m.user_id, m.body) for m in listed.messages],
                         [(m.id, "ann", "py-u1", m.body) for m in posted])
        self.assertEqual(listed.last_id, posted[-1].id)


if __name__ == "__main__":
    unittest.main(verbosity=2)
