from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DELTA_OUTCOME_APPLIED: DeltaOutcome
DELTA_OUTCOME_RESYNC: DeltaOutcome
DELTA_OUTCOME_STALE: DeltaOutcome
DELTA_OUTCOME_UNSPECIFIED: DeltaOutcome
DESCRIPTOR: _descriptor.FileDescriptor

class ApplyOccupancyDeltaRequest(_message.Message):
    __slots__ = ["code", "leaders_delta", "seq", "viewers_delta"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADERS_DELTA_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_DELTA_FIELD_NUMBER: _ClassVar[int]
    code: str
    leaders_delta: int
    seq: int
    viewers_delta: int
    def __init__(self, code: _Optional[str] = ..., seq: _Optional[int] = ..., viewers_delta: _Optional[int] = ..., leaders_delta: _Optional[int] = ...) -> None: ...

class ApplyOccupancyDeltaResponse(_message.Message):
    __slots__ = ["outcome"]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    outcome: DeltaOutcome
    def __init__(self, outcome: _Optional[_Union[DeltaOutcome, str]] = ...) -> None: ...

class ApplyOccupancySnapshotRequest(_message.Message):
    __slots__ = ["code", "leaders", "seq", "viewers"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADERS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_FIELD_NUMBER: _ClassVar[int]
    code: str
    leaders: int
    seq: int
    viewers: int
    def __init__(self, code: _Optional[str] = ..., seq: _Optional[int] = ..., viewers: _Optional[int] = ..., leaders: _Optional[int] = ...) -> None: ...

class ApplyOccupancySnapshotResponse(_message.Message):
    __slots__ = ["applied"]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    def __init__(self, applied: bool = ...) -> None: ...

class CreateRoomRequest(_message.Message):
    __slots__ = ["name", "video"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    name: str
    video: Video
    def __init__(self, name: _Optional[str] = ..., video: _Optional[_Union[Video, _Mapping]] = ...) -> None: ...

class CreateRoomResponse(_message.Message):
    __slots__ = ["code", "leader_token", "room"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    code: str
    leader_token: str
    room: Room
    def __init__(self, code: _Optional[str] = ..., leader_token: _Optional[str] = ..., room: _Optional[_Union[Room, _Mapping]] = ...) -> None: ...

class GetRoomRequest(_message.Message):
    __slots__ = ["code"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    code: str
    def __init__(self, code: _Optional[str] = ...) -> None: ...

class GetRoomResponse(_message.Message):
    __slots__ = ["room"]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    room: Room
    def __init__(self, room: _Optional[_Union[Room, _Mapping]] = ...) -> None: ...

class ListRoomsRequest(_message.Message):
    __slots__ = ["joinable", "known_version", "page_size", "page_token", "query"]
    JOINABLE_FIELD_NUMBER: _ClassVar[int]
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    joinable: bool
    known_version: int
    page_size: int
    page_token: str
    query: str
    def __init__(self, known_version: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., query: _Optional[str] = ..., joinable: bool = ...) -> None: ...

class ListRoomsResponse(_message.Message):
    __slots__ = ["next_page_token", "not_modified", "rooms", "version"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NOT_MODIFIED_FIELD_NUMBER: _ClassVar[int]
    ROOMS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    not_modified: bool
    rooms: _containers.RepeatedCompositeFieldContainer[Room]
    version: int
    def __init__(self, rooms: _Optional[_Iterable[_Union[Room, _Mapping]]] = ..., version: _Optional[int] = ..., not_modified: bool = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RemoveRoomRequest(_message.Message):
    __slots__ = ["code"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    code: str
    def __init__(self, code: _Optional[str] = ...) -> None: ...

class RemoveRoomResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: bool = ...) -> None: ...

class Room(_message.Message):
    __slots__ = ["code", "created_at", "last_activity", "leader_present", "name", "video", "viewers"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    LEADER_PRESENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_FIELD_NUMBER: _ClassVar[int]
    code: str
    created_at: int
    last_activity: int
    leader_present: bool
    name: str
    video: Video
    viewers: int
    def __init__(self, code: _Optional[str] = ..., name: _Optional[str] = ..., video: _Optional[_Union[Video, _Mapping]] = ..., viewers: _Optional[int] = ..., leader_present: bool = ..., last_activity: _Optional[int] = ..., created_at: _Optional[int] = ...) -> None: ...

class TouchRoomRequest(_message.Message):
    __slots__ = ["at", "code"]
    AT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    at: int
    code: str
    def __init__(self, code: _Optional[str] = ..., at: _Optional[int] = ...) -> None: ...

class TouchRoomResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class VerifyLeaderTokenRequest(_message.Message):
    __slots__ = ["code", "leader_token"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    code: str
    leader_token: str
    def __init__(self, code: _Optional[str] = ..., leader_token: _Optional[str] = ...) -> None: ...

class VerifyLeaderTokenResponse(_message.Message):
    __slots__ = ["room", "valid"]
    ROOM_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    room: Room
    valid: bool
    def __init__(self, valid: bool = ..., room: _Optional[_Union[Room, _Mapping]] = ...) -> None: ...

class Video(_message.Message):
    __slots__ = ["duration_ms", "title"]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    duration_ms: int
    title: str
    def __init__(self, title: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class DeltaOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
