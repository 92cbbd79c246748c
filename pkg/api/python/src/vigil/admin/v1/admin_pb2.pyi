from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Alarm(_message.Message):
    __slots__ = ["attempts", "due_at", "id", "in_flight", "late_ms", "shard"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LATE_MS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    due_at: int
    id: str
    in_flight: bool
    late_ms: int
    shard: int
    def __init__(self, id: _Optional[str] = ..., shard: _Optional[int] = ..., due_at: _Optional[int] = ..., in_flight: bool = ..., attempts: _Optional[int] = ..., late_ms: _Optional[int] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ["attempts", "dead_at", "error", "id", "shard"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    DEAD_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    dead_at: int
    error: str
    id: str
    shard: int
    def __init__(self, id: _Optional[str] = ..., shard: _Optional[int] = ..., attempts: _Optional[int] = ..., error: _Optional[str] = ..., dead_at: _Optional[int] = ...) -> None: ...

class DiscardDeadLetterRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DiscardDeadLetterResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ["dead_letters", "namespace"]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ..., dead_letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ...) -> None: ...

class ListPendingRequest(_message.Message):
    __slots__ = ["next_per_shard"]
    NEXT_PER_SHARD_FIELD_NUMBER: _ClassVar[int]
    next_per_shard: int
    def __init__(self, next_per_shard: _Optional[int] = ...) -> None: ...

class ListPendingResponse(_message.Message):
    __slots__ = ["dead", "in_flight", "namespace", "now", "oldest_overdue", "overdue", "pending", "shards"]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NOW_FIELD_NUMBER: _ClassVar[int]
    OLDEST_OVERDUE_FIELD_NUMBER: _ClassVar[int]
    OVERDUE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    dead: int
    in_flight: int
    namespace: str
    now: int
    oldest_overdue: Alarm
    overdue: int
    pending: int
    shards: _containers.RepeatedCompositeFieldContainer[ShardPending]
    def __init__(self, namespace: _Optional[str] = ..., now: _Optional[int] = ..., pending: _Optional[int] = ..., overdue: _Optional[int] = ..., in_flight: _Optional[int] = ..., dead: _Optional[int] = ..., oldest_overdue: _Optional[_Union[Alarm, _Mapping]] = ..., shards: _Optional[_Iterable[_Union[ShardPending, _Mapping]]] = ...) -> None: ...

class LookupObjectRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class LookupObjectResponse(_message.Message):
    __slots__ = ["alarm", "dead_letter", "found", "id", "namespace", "object", "shard"]
    ALARM_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    alarm: Alarm
    dead_letter: DeadLetter
    found: bool
    id: str
    namespace: str
    object: _struct_pb2.Struct
    shard: int
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., shard: _Optional[int] = ..., found: bool = ..., object: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., alarm: _Optional[_Union[Alarm, _Mapping]] = ..., dead_letter: _Optional[_Union[DeadLetter, _Mapping]] = ...) -> None: ...

class ReplayDeadLetterRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReplayDeadLetterResponse(_message.Message):
    __slots__ = ["alarm"]
    ALARM_FIELD_NUMBER: _ClassVar[int]
    alarm: Alarm
    def __init__(self, alarm: _Optional[_Union[Alarm, _Mapping]] = ...) -> None: ...

class ShardPending(_message.Message):
    __slots__ = ["dead", "in_flight", "next", "overdue", "pending", "shard"]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    OVERDUE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    dead: int
    in_flight: int
    next: _containers.RepeatedCompositeFieldContainer[Alarm]
    overdue: int
    pending: int
    shard: int
    def __init__(self, shard: _Optional[int] = ..., pending: _Optional[int] = ..., overdue: _Optional[int] = ..., in_flight: _Optional[int] = ..., dead: _Optional[int] = ..., next: _Optional[_Iterable[_Union[Alarm, _Mapping]]] = ...) -> None: ...
