"""Chat with deadlines, paging and a following iterator.

::

    import grpc
    from vigil.chatclient import Chat

    chat = Chat(grpc.insecure_channel("127.0.0.1:7003"))
    chat.post("general", "hi", username="ann")           # retried safely: one message stored
    for m in chat.history("general"):                    # every kept message, page by page
        print(m.id, m.user, m.body)
    for m in chat.follow("general", since=last_seen):    # then every new one, as it comes
        print(m.id, m.user, m.body)

Every call waits at most ``timeout`` seconds (default 5 s, per client or per call) and raises
``vigil.errors.DeadlineExceeded`` past it; errors carry the service's sentence.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Iterator, Optional

import grpc

from vigil._retry import Retried, call_with_retries
from vigil.chat.v1 import chat_pb2, chat_pb2_grpc
from vigil.errors import DeadlineExceeded, Unavailable, from_rpc_error

__all__ = ["Chat", "Follow", "DEFAULT_TIMEOUT"]

#: How long a call may take when no timeout is given, in seconds.
DEFAULT_TIMEOUT = 5.0

# A follow stream broken by these is joined again from the last message received.
_REJOIN = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class Chat:
    """The chat service's calls, each with a deadline.

    ``channel`` is a ``grpc.Channel`` to the chat service (the caller owns and closes it);
    ``timeout`` is the default deadline of each call in seconds.
    """

    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._stub = chat_pb2_grpc.ChatServiceStub(channel)
        self._timeout = timeout

    def post(self, room: str, body: str, *, user_id: str = "", username: str = "", post_id: Optional[str] = None,
             timeout: Optional[float] = None) -> chat_pb2.ChatMessage:
        """Posts ``body`` (1-4096 characters) to ``room`` and returns the stored message with its
        id. ``post_id`` is the idempotency key (default: a new UUID), so the post is sent again
        when the service could not be reached and is still stored once. An empty ``user_id`` is
        a random UUID and an empty ``username`` "anonymous", as the service decides."""
        req = chat_pb2.PostMessageRequest(room=room, body=body, user_id=user_id, username=username,
                                          post_id=post_id or str(uuid.uuid4()))
        try:
            return call_with_retries(f"post to {room!r}", self._t(timeout), lambda t: self._stub.PostMessage(req, timeout=t).message)
        except Retried as r:
            raise r.err from None

    def history(self, room: str, *, since: int = 0, page_size: int = 100,
                timeout: Optional[float] = None) -> Iterator[chat_pb2.ChatMessage]:
        """Every kept message of ``room`` with an id greater than ``since``, oldest first, read
        ``page_size`` (1-1000) at a time as the iteration goes; each page is one call with its
        own deadline. Ends at the room's last message as of the last page read."""
        cursor = since
        while True:
            req = chat_pb2.ListMessagesRequest(room=room, limit=page_size, since=cursor)
            try:
                page = call_with_retries(f"history of {room!r}", self._t(timeout), lambda t: self._stub.ListMessages(req, timeout=t))
            except Retried as r:
                raise r.err from None
            yield from page.messages
            if not page.messages or page.messages[-1].id >= page.last_id:
                return
            cursor = page.messages[-1].id

    def follow(self, room: str, since: Optional[int] = None, *, timeout: Optional[float] = None) -> "Follow":
        """The messages of ``room`` as they come, over one ``ChatService.Connect`` stream: first
        the kept ones with an id greater than ``since`` (``None``: the service's last few), then
        each new one, in id order, with no gap and no repeat. When the stream breaks (a replica
        shuts down, the reader fell behind) it joins again from the last message yielded.

        The iteration has no end of its own: ``close()`` ends it and the stream, from any thread
        (the iteration then stops), and so does leaving ``with chat.follow(...) as messages:``.
        ``timeout`` bounds each join (the service's first answer), and a run of
        failed joins longer than it raises ``Unavailable``; a quiet room is not a failure, so
        give the channel keepalive options to notice a dead connection while waiting.
        """
        return Follow(self._stub, room, since, self._t(timeout))

    def _t(self, timeout: Optional[float]) -> float:
        return self._timeout if timeout is None else timeout


class Follow(Iterator[chat_pb2.ChatMessage]):
    """The iterator ``Chat.follow`` returns: iterate it for messages, ``close()`` it to stop."""

    def __init__(self, stub: chat_pb2_grpc.ChatServiceStub, room: str, since: Optional[int], timeout: float) -> None:
        self._stub = stub
        self._closed = threading.Event()
        self._call: Optional[grpc.Call] = None
        self._messages = self._follow(room, since, timeout)

    def __next__(self) -> chat_pb2.ChatMessage:
        return next(self._messages)

    def close(self) -> None:
        """Ends the stream; an iteration in progress (in any thread) stops."""
        self._closed.set()
        call = self._call
        if call is not None:
            call.cancel()
        try:
            self._messages.close()
        except ValueError:  # iterating in another thread: the cancel ends it there
            pass

    def __enter__(self) -> "Follow":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _follow(self, room: str, since: Optional[int], t: float) -> Iterator[chat_pb2.ChatMessage]:
        last = since
        failing_since: Optional[float] = None
        backoff = 0.05
        while not self._closed.is_set():
            stop = threading.Event()
            join = chat_pb2.Join(room=room) if last is None else chat_pb2.Join(room=room, since=last)
            call = self._stub.Connect(_join_then_wait(join, stop))
            self._call = call
            if self._closed.is_set():  # closed as the call started
                call.cancel()
            joined = threading.Event()
            timer = threading.Timer(t, lambda: None if joined.is_set() else call.cancel())
            timer.daemon = True
            timer.start()
            try:
                for resp in call:
                    kind = resp.WhichOneof("kind")
                    if kind == "history":
                        joined.set()
                        failing_since, backoff = None, 0.05
                        for m in resp.history.messages:
                            if last is None or m.id > last:
                                last = m.id
                                yield m
                        last = max(last or 0, resp.history.last_id)
                    elif kind == "message" and (last is None or resp.message.id > last):
                        last = resp.message.id
                        yield resp.message
                return  # the service ended the stream
            except grpc.RpcError as err:
                code = err.code() if callable(getattr(err, "code", None)) else None
                if self._closed.is_set():
                    return
                if code == grpc.StatusCode.CANCELLED and not joined.is_set():
                    raise DeadlineExceeded(f"follow {room!r}: no answer to the join within {t:g} s",
                                           grpc.StatusCode.DEADLINE_EXCEEDED) from None
                if code not in _REJOIN:
                    raise from_rpc_error(err, f"follow {room!r}") from None
                now = time.monotonic()
                failing_since = failing_since if failing_since is not None else now
                if now + backoff - failing_since > t:
                    raise Unavailable(f"follow {room!r}: {err.details() or code.name}", code) from None
                time.sleep(backoff)
                backoff = min(2 * backoff, 1.0)
            finally:
                timer.cancel()
                stop.set()
                call.cancel()


def _join_then_wait(join: chat_pb2.Join, stop: threading.Event) -> Iterator[chat_pb2.ConnectRequest]:
    """A Connect stream's requests: the join, then nothing until stop (ending the requests would
    half-close the stream)."""
    yield chat_pb2.ConnectRequest(join=join)
    stop.wait()
