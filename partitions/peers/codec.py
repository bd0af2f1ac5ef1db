"""What crosses between nodes in a peer call: typed values and typed errors, as msgpack (pure, no I/O).

A peer call's arguments and result are plain values (None, bool, int, float, str, bytes, lists, dicts),
tuples and frozensets, and instances of the registered result types (dataclasses and named tuples); an
``IntEnum`` travels as its int, which a dataclass holding one turns back into its member. A
typed error raised by the callee (any ``RaftlogError``) travels as its class name, message and attributes
and is raised again on the caller as the same class, so the caller's one error table maps it as if it had
been raised locally: ``NotLeader`` keeps its ``leader_hint``, ``OffsetOutOfRange`` its offsets.

Nothing else is ever constructed from the bytes (no pickle): an unregistered type name is a
``PeerProtocolError``. Both ends are nodes holding the cluster secret; this is about getting types back,
not about trusting input, which every callee still checks.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

import msgpack

from partitions.errors import PeerProtocolError
from raftlog.errors import RaftlogError

_TUPLE, _FROZENSET, _RECORD, _ERROR = 1, 2, 3, 4


class Registry:
    """The types a peer value may hold, by name (``register`` each result type once)."""

    def __init__(self) -> None:
        self._types: dict[str, type] = {}

    def register(self, *kinds: type) -> None:
        for kind in kinds:
            is_record = dataclasses.is_dataclass(kind) or _is_named_tuple(kind)
            if not is_record:
                raise TypeError(f"{kind!r} is neither a dataclass nor a named tuple")
            known = self._types.setdefault(kind.__name__, kind)
            if known is not kind:
                raise TypeError(f"two peer types named {kind.__name__}: {known!r} and {kind!r}")

    def extend(self, kinds: Iterable[type]) -> None:
        self.register(*kinds)

    def get(self, name: str) -> type:
        kind = self._types.get(name)
        if kind is None:
            raise PeerProtocolError(f"unknown peer value type {name!r}")
        return kind

    def has(self, kind: type) -> bool:
        return self._types.get(kind.__name__) is kind


def _is_named_tuple(kind: type) -> bool:
    return issubclass(kind, tuple) and hasattr(kind, "_fields")


def pack(value: object, registry: Registry) -> bytes:
    def default(item: object) -> object:
        return _ext(item, registry, default)

    packed: bytes = msgpack.packb(value, default=default, use_bin_type=True, strict_types=True)
    return packed


def _ext(item: object, registry: Registry, default: Any) -> object:
    """What msgpack packs in place of ``item``: an extension for the types it would lose, a plain map or
    bytes for the mapping and buffer types it does not know."""
    kind = type(item)
    if isinstance(item, BaseException):
        if not isinstance(item, RaftlogError):
            raise PeerProtocolError(f"only typed errors cross between nodes, not {kind.__name__}: {item}")
        attributes = {name: _portable(value, registry) for name, value in vars(item).items()}
        body = [kind.__name__, str(item), attributes]
        return msgpack.ExtType(_ERROR, _packb(body, default))
    if registry.has(kind):
        named = _is_named_tuple(kind)
        fields = dict(zip(kind._fields, item, strict=True)) if named else _record_fields(item)  # type: ignore[attr-defined,call-overload]
        return msgpack.ExtType(_RECORD, _packb([kind.__name__, fields], default))
    if kind is tuple:
        return msgpack.ExtType(_TUPLE, _packb(list(item), default))  # type: ignore[call-overload]
    if kind is frozenset or kind is set:
        return msgpack.ExtType(_FROZENSET, _packb(sorted(item, key=repr), default))  # type: ignore[call-overload]
    if isinstance(item, Mapping):  # a MappingProxyType or a dict subclass: a plain map
        return dict(item)
    if isinstance(item, memoryview | bytearray):
        return bytes(item)
    if isinstance(item, enum.IntEnum):  # its code: the dataclass holding it turns it back (``acls``)
        return int(item)
    raise PeerProtocolError(f"a {kind.__name__} cannot cross between nodes: {item!r:.80}")


def _record_fields(item: Any) -> dict[str, object]:
    """A dataclass's fields as they travel: a field holding its declared default is left out, so a field
    added (with a default) in a newer release reaches a node of the previous release only when it says
    something, and that node, whose class lacks the field, still decodes the value (rolling upgrades)."""
    fields: dict[str, object] = {}
    for field in dataclasses.fields(item):
        value = getattr(item, field.name)
        if field.default is not dataclasses.MISSING and _same(value, field.default):
            continue
        fields[field.name] = value
    return fields


def _same(value: object, default: object) -> bool:
    return type(value) is type(default) and bool(value == default)  # a default is a plain value


def _packb(value: object, default: Any) -> bytes:
    packed: bytes = msgpack.packb(value, default=default, use_bin_type=True, strict_types=True)
    return packed


def _portable(value: object, registry: Registry) -> object:
    """An error attribute as it can travel: itself when it packs, else its text (e.g. a nested cause)."""
    try:
        pack(value, registry)
    except (PeerProtocolError, TypeError, ValueError, OverflowError):
        return repr(value)
    return value


def unpack(data: bytes, registry: Registry, errors: ErrorTypes) -> object:
    def ext_hook(code: int, payload: bytes) -> object:
        inner = msgpack.unpackb(payload, ext_hook=ext_hook, raw=False, strict_map_key=False)
        if code == _TUPLE:
            return tuple(inner)
        if code == _FROZENSET:
            return frozenset(inner)
        if code == _RECORD:
            name, fields = inner
            kind = registry.get(name)
            return kind(**fields)
        if code == _ERROR:
            name, message, attributes = inner
            return errors.rebuild(name, message, attributes)
        raise PeerProtocolError(f"unknown peer extension type {code}")

    try:
        return msgpack.unpackb(data, ext_hook=ext_hook, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise PeerProtocolError(f"undecodable peer message: {exc}") from None


class ErrorTypes:
    """Every typed error class, by name: the subclasses of ``RaftlogError`` loaded in this process (the
    layers' error modules are imported by whoever calls peers). Rebuilt lazily when a name is new."""

    def __init__(self) -> None:
        self._by_name: dict[str, type[RaftlogError]] = {}

    def _scan(self) -> None:
        pending: list[type[RaftlogError]] = [RaftlogError]
        while pending:
            kind = pending.pop()
            self._by_name.setdefault(kind.__name__, kind)
            pending.extend(kind.__subclasses__())

    def rebuild(self, name: str, message: str, attributes: dict[str, Any]) -> RaftlogError:
        kind = self._by_name.get(name)
        if kind is None:
            self._scan()
            kind = self._by_name.get(name)
        if kind is None:
            return PeerProtocolError(f"a peer raised {name}, unknown here: {message}")
        error = kind.__new__(kind)
        Exception.__init__(error, message)
        for attribute, value in attributes.items():
            setattr(error, attribute, value)
        return error
