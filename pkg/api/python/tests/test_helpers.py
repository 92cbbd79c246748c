"""vigil.reservationclient and vigil.chatclient against a running stack, and their deadlines
against services that never answer. Run by deploy/python-client-test.sh (make test-python)."""

import os
import queue
import threading
import time
import unittest
import uuid
from concurrent import futures

import grpc

from vigil.chat.v1 import chat_pb2_grpc
from vigil.chatclient import Chat
from vigil.errors import DeadlineExceeded, FailedPrecondition, InvalidArgument
from vigil.reservationclient import Reservations
from vigil.reservations.v1 import reservations_pb2_grpc

RESERVATIONS = os.environ.get("VIGIL_RESERVATIONS_ADDR", "127.0.0.1:7001")
CHAT = os.environ.get("VIGIL_CHAT_ADDR", "127.0.0.1:7003")
SLACK = 2.0  # seconds a loaded machine may add to a bounded wait


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def channel(addr: str) -> grpc.Channel:
    ch = grpc.insecure_channel(addr)
    grpc.channel_ready_future(ch).result(timeout=60)
    return ch


class ReservationsTest(unittest.TestCase):
    def setUp(self):
        ch = channel(RESERVATIONS)
        self.addCleanup(ch.close)
        self.r = Reservations(ch, timeout=10)

    def test_hold_confirm(self):
        rid = unique("py-hold")
        held = self.r.hold(rid, ttl=60)
        self.assertEqual((held.reservation_id, held.status), (rid, "held"))
        self.assertEqual(held.expires_at - held.created_at, 60_000)
        self.assertEqual(self.r.confirm(rid).status, "confirmed")
        self.assertEqual(self.r.get(rid).status, "confirmed")
        with self.assertRaises(FailedPrecondition) as caught:
            self.r.release(rid)
        self.assertTrue(caught.exception.details)

    def test_hold_release(self):
        rid = unique("py-release")
        self.r.hold(rid, 30)
        self.assertEqual(self.r.release(rid).status, "released")
        self.assertEqual(self.r.get(unique("py-none")).status, "missing")

    def test_bad_ttl_is_invalid_argument_with_the_services_sentence(self):
        with self.assertRaises(InvalidArgument) as caught:
            self.r.hold(unique("py-bad"), ttl=0)
        self.assertIn("ttl", str(caught.exception).lower())


class ChatTest(unittest.TestCase):
    def setUp(self):
        ch = channel(CHAT)
        self.addCleanup(ch.close)
        self.chat = Chat(ch, timeout=10)

    def test_post_is_idempotent_by_post_id(self):
        room = unique("py-room")
        a = self.chat.post(room, "once", username="ann", user_id="py-u1", post_id="p-1")
        b = self.chat.post(room, "once", username="ann", user_id="py-u1", post_id="p-1")
        self.assertEqual(a.id, b.id)
        self.assertEqual([m.body for m in self.chat.history(room)], ["once"])

    def test_history_pages(self):
        room = unique("py-pages")
        posted = [self.chat.post(room, f"m{i}", username="ann").id for i in range(7)]
        self.assertEqual([m.id for m in self.chat.history(room, page_size=2)], posted)
        self.assertEqual([m.id for m in self.chat.history(room, since=posted[4], page_size=3)], posted[5:])

    def test_follow_yields_kept_then_new_messages(self):
        room = unique("py-follow")
        first = [self.chat.post(room, f"old {i}", username="ann").id for i in range(3)]
        got: "queue.Queue[object]" = queue.Queue()
        follow = self.chat.follow(room, since=first[0])

        def read():
            try:
                for m in follow:
                    got.put(m.id)
            except Exception as e:  # handed to the test thread
                got.put(e)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        self.assertEqual([got.get(timeout=30) for _ in range(2)], first[1:])
        new = self.chat.post(room, "new", username="bob").id
        self.assertEqual(got.get(timeout=30), new)
        self.assertTrue(t.is_alive(), "follow ended on its own")
        follow.close()  # from another thread than the one iterating: the iteration stops
        t.join(30)
        self.assertFalse(t.is_alive(), "follow did not stop when closed")
        self.assertTrue(got.empty(), "follow failed instead of stopping")


class SilentReservations(reservations_pb2_grpc.ReservationServiceServicer):
    def __init__(self, stop):
        self.stop = stop

    def _hang(self, request, context):
        self.stop.wait()
        context.abort(grpc.StatusCode.UNAVAILABLE, "stopped")

    CreateReservation = GetReservation = ConfirmReservation = ReleaseReservation = _hang


class SilentChat(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, stop):
        self.stop = stop

    def _hang(self, request, context):
        self.stop.wait()
        context.abort(grpc.StatusCode.UNAVAILABLE, "stopped")

    PostMessage = ListMessages = Connect = _hang


class TimeoutsTest(unittest.TestCase):
    """Every helper call ends by its deadline when the service never answers."""

    def setUp(self):
        stop = threading.Event()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        reservations_pb2_grpc.add_ReservationServiceServicer_to_server(SilentReservations(stop), server)
        chat_pb2_grpc.add_ChatServiceServicer_to_server(SilentChat(stop), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, 0)
        self.addCleanup(stop.set)
        self.ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.addCleanup(self.ch.close)

    def assert_times_out(self, call, timeout):
        start = time.monotonic()
        with self.assertRaises(DeadlineExceeded) as caught:
            call()
        elapsed = time.monotonic() - start
        self.assertGreaterEqual(elapsed, timeout * 0.99)
        self.assertLess(elapsed, timeout + SLACK)
        self.assertTrue(caught.exception.details)

    def test_every_call(self):
        r, chat = Reservations(self.ch, timeout=0.3), Chat(self.ch, timeout=0.3)
        for name, call in [
            ("hold", lambda: r.hold("x", 60)),
            ("get", lambda: r.get("x")),
            ("confirm", lambda: r.confirm("x")),
            ("release", lambda: r.release("x", timeout=0.5)),
            ("post", lambda: chat.post("room", "hi")),
            ("history", lambda: list(chat.history("room"))),
            ("follow", lambda: next(iter(chat.follow("room", timeout=0.4)))),
        ]:
            with self.subTest(call=name):
                self.assert_times_out(call, 0.5 if name == "release" else 0.4 if name == "follow" else 0.3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
