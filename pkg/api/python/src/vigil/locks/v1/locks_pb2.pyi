from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

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
    __slots__ = ["owner", "resource"]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    owner: str
    resource: str
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: bool = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ["owner", "resource", "ttl_ms"]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    owner: str
    resource: str
    ttl_ms: int
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ["expires_at", "renewed"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    expires_at: int
    renewed: bool
    def __init__(self, renewed: bool = ..., expires_at: _Optional[int] = ...) -> None: ...
