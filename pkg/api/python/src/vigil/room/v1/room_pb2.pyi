from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ROLE_LEADER: Role
ROLE_UNSPECIFIED: Role
ROLE_VIEWER: Role

class Ack(_message.Message):
    __slots__ = ["at", "ref", "repeat"]
    AT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    at: int
    ref: int
    repeat: bool
    def __init__(self, ref: _Optional[int] = ..., repeat: bool = ..., at: _Optional[int] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ["control", "detach", "hello", "ping"]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    control: SessionControl
    detach: str
    hello: Hello
    ping: int
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., detach: _Optional[str] = ..., control: _Optional[_Union[SessionControl, _Mapping]] = ..., ping: _Optional[int] = ...) -> None: ...

class AttachResponse(_message.Message):
    __slots__ = ["end", "frame", "pong", "session_id", "version"]
    END_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    end: SessionEnd
    frame: JoinResponse
    pong: int
    session_id: str
    version: int
    def __init__(self, session_id: _Optional[str] = ..., frame: _Optional[_Union[JoinResponse, _Mapping]] = ..., version: _Optional[int] = ..., end: _Optional[_Union[SessionEnd, _Mapping]] = ..., pong: _Optional[int] = ...) -> None: ...

class CountIn(_message.Message):
    __slots__ = ["beats", "bpm"]
    BEATS_FIELD_NUMBER: _ClassVar[int]
    BPM_FIELD_NUMBER: _ClassVar[int]
    beats: int
    bpm: int
    def __init__(self, beats: _Optional[int] = ..., bpm: _Optional[int] = ...) -> None: ...

class EndRoomRequest(_message.Message):
    __slots__ = ["code", "leader_token"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    code: str
    leader_token: str
    def __init__(self, code: _Optional[str] = ..., leader_token: _Optional[str] = ...) -> None: ...

class EndRoomResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Ended(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["message", "ref"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    message: str
    ref: int
    def __init__(self, message: _Optional[str] = ..., ref: _Optional[int] = ...) -> None: ...

class Formation(_message.Message):
    __slots__ = ["at", "formation"]
    AT_FIELD_NUMBER: _ClassVar[int]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    at: int
    formation: _struct_pb2.Value
    def __init__(self, formation: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., at: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["client_id", "code", "leader_token", "name", "role", "session_id"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    code: str
    leader_token: str
    name: str
    role: Role
    session_id: str
    def __init__(self, code: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., client_id: _Optional[str] = ..., leader_token: _Optional[str] = ..., session_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ["formation", "hello", "loop", "mark", "mark_formation", "ref", "reload", "sync"]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    LOOP_FIELD_NUMBER: _ClassVar[int]
    MARK_FIELD_NUMBER: _ClassVar[int]
    MARK_FORMATION_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    RELOAD_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    formation: Formation
    hello: Hello
    loop: Loop
    mark: Mark
    mark_formation: MarkFormation
    ref: int
    reload: Reload
    sync: Sync
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., sync: _Optional[_Union[Sync, _Mapping]] = ..., formation: _Optional[_Union[Formation, _Mapping]] = ..., mark: _Optional[_Union[Mark, _Mapping]] = ..., reload: _Optional[_Union[Reload, _Mapping]] = ..., loop: _Optional[_Union[Loop, _Mapping]] = ..., mark_formation: _Optional[_Union[MarkFormation, _Mapping]] = ..., ref: _Optional[int] = ...) -> None: ...

class JoinResponse(_message.Message):
    __slots__ = ["ack", "ended", "error", "formation", "join", "leave", "loop", "mark", "mark_formation", "occupancy", "reload", "state", "sync"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    LOOP_FIELD_NUMBER: _ClassVar[int]
    MARK_FIELD_NUMBER: _ClassVar[int]
    MARK_FORMATION_FIELD_NUMBER: _ClassVar[int]
    OCCUPANCY_FIELD_NUMBER: _ClassVar[int]
    RELOAD_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SYNC_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    ended: Ended
    error: Error
    formation: Formation
    join: Person
    leave: PersonLeft
    loop: Loop
    mark: Mark
    mark_formation: MarkFormation
    occupancy: Occupancy
    reload: Reload
    state: State
    sync: Sync
    def __init__(self, state: _Optional[_Union[State, _Mapping]] = ..., sync: _Optional[_Union[Sync, _Mapping]] = ..., formation: _Optional[_Union[Formation, _Mapping]] = ..., mark: _Optional[_Union[Mark, _Mapping]] = ..., reload: _Optional[_Union[Reload, _Mapping]] = ..., occupancy: _Optional[_Union[Occupancy, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., ended: _Optional[_Union[Ended, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., loop: _Optional[_Union[Loop, _Mapping]] = ..., mark_formation: _Optional[_Union[MarkFormation, _Mapping]] = ..., join: _Optional[_Union[Person, _Mapping]] = ..., leave: _Optional[_Union[PersonLeft, _Mapping]] = ...) -> None: ...

class ListPeopleRequest(_message.Message):
    __slots__ = ["code"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    code: str
    def __init__(self, code: _Optional[str] = ...) -> None: ...

class ListPeopleResponse(_message.Message):
    __slots__ = ["people"]
    PEOPLE_FIELD_NUMBER: _ClassVar[int]
    people: _containers.RepeatedCompositeFieldContainer[Person]
    def __init__(self, people: _Optional[_Iterable[_Union[Person, _Mapping]]] = ...) -> None: ...

class Loop(_message.Message):
    __slots__ = ["at", "end_ms", "start_ms"]
    AT_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    at: int
    end_ms: int
    start_ms: int
    def __init__(self, start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., at: _Optional[int] = ...) -> None: ...

class Mark(_message.Message):
    __slots__ = ["at", "formation", "label", "position_ms"]
    AT_FIELD_NUMBER: _ClassVar[int]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    POSITION_MS_FIELD_NUMBER: _ClassVar[int]
    at: int
    formation: _struct_pb2.Value
    label: str
    position_ms: int
    def __init__(self, position_ms: _Optional[int] = ..., label: _Optional[str] = ..., at: _Optional[int] = ..., formation: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class MarkFormation(_message.Message):
    __slots__ = ["at", "formation", "position_ms"]
    AT_FIELD_NUMBER: _ClassVar[int]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    POSITION_MS_FIELD_NUMBER: _ClassVar[int]
    at: int
    formation: _struct_pb2.Value
    position_ms: int
    def __init__(self, position_ms: _Optional[int] = ..., formation: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., at: _Optional[int] = ...) -> None: ...

class Occupancy(_message.Message):
    __slots__ = ["leader_present", "viewers"]
    LEADER_PRESENT_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_FIELD_NUMBER: _ClassVar[int]
    leader_present: bool
    viewers: int
    def __init__(self, viewers: _Optional[int] = ..., leader_present: bool = ...) -> None: ...

class Person(_message.Message):
    __slots__ = ["client_id", "name", "role", "since"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    name: str
    role: Role
    since: int
    def __init__(self, client_id: _Optional[str] = ..., name: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., since: _Optional[int] = ...) -> None: ...

class PersonLeft(_message.Message):
    __slots__ = ["client_id", "role"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    role: Role
    def __init__(self, client_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ...) -> None: ...

class Playback(_message.Message):
    __slots__ = ["at", "count_in", "playing", "position_ms", "rate"]
    AT_FIELD_NUMBER: _ClassVar[int]
    COUNT_IN_FIELD_NUMBER: _ClassVar[int]
    PLAYING_FIELD_NUMBER: _ClassVar[int]
    POSITION_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    at: int
    count_in: CountIn
    playing: bool
    position_ms: int
    rate: float
    def __init__(self, playing: bool = ..., position_ms: _Optional[int] = ..., at: _Optional[int] = ..., rate: _Optional[float] = ..., count_in: _Optional[_Union[CountIn, _Mapping]] = ...) -> None: ...

class Reload(_message.Message):
    __slots__ = ["at", "video"]
    AT_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    at: int
    video: Video
    def __init__(self, video: _Optional[_Union[Video, _Mapping]] = ..., at: _Optional[int] = ...) -> None: ...

class SessionControl(_message.Message):
    __slots__ = ["request", "session_id"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    request: JoinRequest
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., request: _Optional[_Union[JoinRequest, _Mapping]] = ...) -> None: ...

class SessionEnd(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class State(_message.Message):
    __slots__ = ["formation", "leader_present", "loop", "marks", "people", "playback", "resumed", "video", "viewers"]
    FORMATION_FIELD_NUMBER: _ClassVar[int]
    LEADER_PRESENT_FIELD_NUMBER: _ClassVar[int]
    LOOP_FIELD_NUMBER: _ClassVar[int]
    MARKS_FIELD_NUMBER: _ClassVar[int]
    PEOPLE_FIELD_NUMBER: _ClassVar[int]
    PLAYBACK_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_FIELD_NUMBER: _ClassVar[int]
    formation: _struct_pb2.Value
    leader_present: bool
    loop: Loop
    marks: _containers.RepeatedCompositeFieldContainer[Mark]
    people: _containers.RepeatedCompositeFieldContainer[Person]
    playback: Playback
    resumed: bool
    video: Video
    viewers: int
    def __init__(self, playback: _Optional[_Union[Playback, _Mapping]] = ..., formation: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., marks: _Optional[_Iterable[_Union[Mark, _Mapping]]] = ..., video: _Optional[_Union[Video, _Mapping]] = ..., viewers: _Optional[int] = ..., leader_present: bool = ..., resumed: bool = ..., loop: _Optional[_Union[Loop, _Mapping]] = ..., people: _Optional[_Iterable[_Union[Person, _Mapping]]] = ...) -> None: ...

class Sync(_message.Message):
    __slots__ = ["at", "count_in", "playing", "position_ms", "rate"]
    AT_FIELD_NUMBER: _ClassVar[int]
    COUNT_IN_FIELD_NUMBER: _ClassVar[int]
    PLAYING_FIELD_NUMBER: _ClassVar[int]
    POSITION_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    at: int
    count_in: CountIn
    playing: bool
    position_ms: int
    rate: float
    def __init__(self, playing: bool = ..., position_ms: _Optional[int] = ..., at: _Optional[int] = ..., rate: _Optional[float] = ..., count_in: _Optional[_Union[CountIn, _Mapping]] = ...) -> None: ...

class Video(_message.Message):
    __slots__ = ["duration_ms", "title"]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    duration_ms: int
    title: str
    def __init__(self, title: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
