from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcquireRequest(_message.Message):
    __slots__ = ["owner", "resource", "ttl_ms", "wait_ms"]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    owner: str
    resource: str
    ttl_ms: int
    wait_ms: int
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ["acquired", "expires_at", "fencing_token", "holder"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    expires_at: int
    fencing_token: int
    holder: str
    def __init__(self, acquired: bool = ..., fencing_token: _Optional[int] = ..., expires_at: _Optional[int] = ..., holder: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ["resource"]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    resource: str
    def __init__(self, resource: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["expires_at", "fencing_token", "held", "owner", "resource"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    expires_at: int
    fencing_token: int
    held: bool
    owner: str
    resource: str
    def __init__(self, resource: _Optional[str] = ..., held: bool = ..., owner: _Optional[str] = ..., fencing_token: _Optional[int] = ..., expires_at: _Optional[int] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ["fencing_token", "owner", "resource"]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    owner: str
    resource: str
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: bool = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ["fencing_token", "owner", "resource", "ttl_ms"]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    owner: str
    resource: str
    ttl_ms: int
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ["expires_at", "renewed"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    expires_at: int
    renewed: bool
    def __init__(self, renewed: bool = ..., expires_at: _Optional[int] = ...) -> None: ...

class SessionError(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ["acquire", "cancel", "id", "release", "renew"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireRequest
    cancel: CancelRequest
    id: int
    release: ReleaseRequest
    renew: RenewRequest
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., renew: _Optional[_Union[RenewRequest, _Mapping]] = ..., cancel: _Optional[_Union[CancelRequest, _Mapping]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ["acquire", "error", "id", "release", "renew"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RENEW_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireResponse
    error: SessionError
    id: int
    release: ReleaseResponse
    renew: RenewResponse
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., renew: _Optional[_Union[RenewResponse, _Mapping]] = ..., error: _Optional[_Union[SessionError, _Mapping]] = ...) -> None: ...
