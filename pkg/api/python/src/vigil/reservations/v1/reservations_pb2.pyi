from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfirmReservationRequest(_message.Message):
    __slots__ = ["reservation_id"]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ...) -> None: ...

class ConfirmReservationResponse(_message.Message):
    __slots__ = ["reservation"]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    reservation: Reservation
    def __init__(self, reservation: _Optional[_Union[Reservation, _Mapping]] = ...) -> None: ...

class CreateReservationRequest(_message.Message):
    __slots__ = ["reservation_id", "ttl_seconds"]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    ttl_seconds: int
    def __init__(self, reservation_id: _Optional[str] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class CreateReservationResponse(_message.Message):
    __slots__ = ["reservation"]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    reservation: Reservation
    def __init__(self, reservation: _Optional[_Union[Reservation, _Mapping]] = ...) -> None: ...

class GetReservationRequest(_message.Message):
    __slots__ = ["reservation_id"]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ...) -> None: ...

class GetReservationResponse(_message.Message):
    __slots__ = ["reservation"]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    reservation: Reservation
    def __init__(self, reservation: _Optional[_Union[Reservation, _Mapping]] = ...) -> None: ...

class ReleaseReservationRequest(_message.Message):
    __slots__ = ["reservation_id"]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ...) -> None: ...

class ReleaseReservationResponse(_message.Message):
    __slots__ = ["reservation"]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    reservation: Reservation
    def __init__(self, reservation: _Optional[_Union[Reservation, _Mapping]] = ...) -> None: ...

class ReplayAlarmRequest(_message.Message):
    __slots__ = ["now", "reservation_id"]
    NOW_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    now: int
    reservation_id: str
    def __init__(self, reservation_id: _Optional[str] = ..., now: _Optional[int] = ...) -> None: ...

class ReplayAlarmResponse(_message.Message):
    __slots__ = ["alarm_at", "changed", "created_at", "expiration_count", "expired_at", "expires_at", "reservation_id", "status"]
    ALARM_AT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRATION_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    alarm_at: int
    changed: bool
    created_at: int
    expiration_count: int
    expired_at: int
    expires_at: int
    reservation_id: str
    status: str
    def __init__(self, reservation_id: _Optional[str] = ..., status: _Optional[str] = ..., created_at: _Optional[int] = ..., expires_at: _Optional[int] = ..., expired_at: _Optional[int] = ..., expiration_count: _Optional[int] = ..., alarm_at: _Optional[int] = ..., changed: bool = ...) -> None: ...

class Reservation(_message.Message):
    __slots__ = ["alarm_at", "created_at", "expiration_count", "expired_at", "expires_at", "reservation_id", "status"]
    ALARM_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRATION_COUNT_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    alarm_at: int
    created_at: int
    expiration_count: int
    expired_at: int
    expires_at: int
    reservation_id: str
    status: str
    def __init__(self, reservation_id: _Optional[str] = ..., status: _Optional[str] = ..., created_at: _Optional[int] = ..., expires_at: _Optional[int] = ..., expired_at: _Optional[int] = ..., expiration_count: _Optional[int] = ..., alarm_at: _Optional[int] = ...) -> None: ...
