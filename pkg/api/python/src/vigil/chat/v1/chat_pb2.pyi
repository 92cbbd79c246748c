from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChatMessage(_message.Message):
    __slots__ = ["body", "id", "ts", "user", "user_id"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    body: str
    id: int
    ts: int
    user: str
    user_id: str
    def __init__(self, id: _Optional[int] = ..., user: _Optional[str] = ..., user_id: _Optional[str] = ..., body: _Optional[str] = ..., ts: _Optional[int] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ["join", "post"]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    POST_FIELD_NUMBER: _ClassVar[int]
    join: Join
    post: Post
    def __init__(self, join: _Optional[_Union[Join, _Mapping]] = ..., post: _Optional[_Union[Post, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ["history", "message", "post_result"]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POST_RESULT_FIELD_NUMBER: _ClassVar[int]
    history: History
    message: ChatMessage
    post_result: PostResult
    def __init__(self, history: _Optional[_Union[History, _Mapping]] = ..., message: _Optional[_Union[ChatMessage, _Mapping]] = ..., post_result: _Optional[_Union[PostResult, _Mapping]] = ...) -> None: ...

class History(_message.Message):
    __slots__ = ["join_limit", "last_id", "messages", "truncated"]
    JOIN_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    join_limit: int
    last_id: int
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    truncated: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., last_id: _Optional[int] = ..., truncated: bool = ..., join_limit: _Optional[int] = ...) -> None: ...

class Join(_message.Message):
    __slots__ = ["room", "since"]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    room: str
    since: int
    def __init__(self, room: _Optional[str] = ..., since: _Optional[int] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ["before", "limit", "room", "since"]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    before: int
    limit: int
    room: str
    since: int
    def __init__(self, room: _Optional[str] = ..., limit: _Optional[int] = ..., before: _Optional[int] = ..., since: _Optional[int] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ["last_id", "messages"]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    last_id: int
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., last_id: _Optional[int] = ...) -> None: ...

class Post(_message.Message):
    __slots__ = ["body", "post_id", "ref", "user", "user_id"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    POST_ID_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    body: str
    post_id: str
    ref: str
    user: str
    user_id: str
    def __init__(self, ref: _Optional[str] = ..., post_id: _Optional[str] = ..., user_id: _Optional[str] = ..., user: _Optional[str] = ..., body: _Optional[str] = ...) -> None: ...

class PostMessageRequest(_message.Message):
    __slots__ = ["body", "post_id", "room", "user_id", "username"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    POST_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    body: str
    post_id: str
    room: str
    user_id: str
    username: str
    def __init__(self, room: _Optional[str] = ..., user_id: _Optional[str] = ..., username: _Optional[str] = ..., body: _Optional[str] = ..., post_id: _Optional[str] = ...) -> None: ...

class PostMessageResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: ChatMessage
    def __init__(self, message: _Optional[_Union[ChatMessage, _Mapping]] = ...) -> None: ...

class PostResult(_message.Message):
    __slots__ = ["error", "id", "ref"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    error: str
    id: int
    ref: str
    def __init__(self, ref: _Optional[str] = ..., id: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...
