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
    __slots__ = ["enter", "exit", "join", "ping", "post"]
    ENTER_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    POST_FIELD_NUMBER: _ClassVar[int]
    enter: Enter
    exit: str
    join: Join
    ping: int
    post: Post
    def __init__(self, join: _Optional[_Union[Join, _Mapping]] = ..., post: _Optional[_Union[Post, _Mapping]] = ..., enter: _Optional[_Union[Enter, _Mapping]] = ..., exit: _Optional[str] = ..., ping: _Optional[int] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ["entered", "exited", "history", "joined", "left", "message", "pong", "post_result", "presence"]
    ENTERED_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    JOINED_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    POST_RESULT_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    entered: Entered
    exited: Exited
    history: History
    joined: MemberJoined
    left: MemberLeft
    message: ChatMessage
    pong: int
    post_result: PostResult
    presence: Presence
    def __init__(self, history: _Optional[_Union[History, _Mapping]] = ..., message: _Optional[_Union[ChatMessage, _Mapping]] = ..., post_result: _Optional[_Union[PostResult, _Mapping]] = ..., entered: _Optional[_Union[Entered, _Mapping]] = ..., exited: _Optional[_Union[Exited, _Mapping]] = ..., joined: _Optional[_Union[MemberJoined, _Mapping]] = ..., left: _Optional[_Union[MemberLeft, _Mapping]] = ..., presence: _Optional[_Union[Presence, _Mapping]] = ..., pong: _Optional[int] = ...) -> None: ...

class Enter(_message.Message):
    __slots__ = ["session_id", "user_id", "username"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    user_id: str
    username: str
    def __init__(self, session_id: _Optional[str] = ..., user_id: _Optional[str] = ..., username: _Optional[str] = ...) -> None: ...

class Entered(_message.Message):
    __slots__ = ["error", "resumed", "session_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    resumed: bool
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., resumed: bool = ..., error: _Optional[str] = ...) -> None: ...

class Exited(_message.Message):
    __slots__ = ["error", "session_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class History(_message.Message):
    __slots__ = ["join_limit", "last_id", "messages", "presence", "truncated"]
    JOIN_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LAST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    join_limit: int
    last_id: int
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    presence: Presence
    truncated: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., last_id: _Optional[int] = ..., truncated: bool = ..., join_limit: _Optional[int] = ..., presence: _Optional[_Union[Presence, _Mapping]] = ...) -> None: ...

class Join(_message.Message):
    __slots__ = ["presence", "room", "since"]
    PRESENCE_FIELD_NUMBER: _ClassVar[int]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    presence: bool
    room: str
    since: int
    def __init__(self, room: _Optional[str] = ..., since: _Optional[int] = ..., presence: bool = ...) -> None: ...

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

class ListPresenceRequest(_message.Message):
    __slots__ = ["room"]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    room: str
    def __init__(self, room: _Optional[str] = ...) -> None: ...

class ListPresenceResponse(_message.Message):
    __slots__ = ["members", "version"]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    version: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ["since", "user_id", "username"]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    since: int
    user_id: str
    username: str
    def __init__(self, user_id: _Optional[str] = ..., username: _Optional[str] = ..., since: _Optional[int] = ...) -> None: ...

class MemberJoined(_message.Message):
    __slots__ = ["member", "version"]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    member: Member
    version: int
    def __init__(self, member: _Optional[_Union[Member, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class MemberLeft(_message.Message):
    __slots__ = ["user_id", "version"]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    version: int
    def __init__(self, user_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

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

class Presence(_message.Message):
    __slots__ = ["members", "version"]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    version: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...
