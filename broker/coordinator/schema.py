"""The primitives of the coordinators' record schemas (Kafka's generated message classes, as the internal topics'
keys and values use them): int16-length UTF-8 strings (-1: null), int32-length bytes, int32-count arrays, and the
flexible versions' unsigned-varint lengths plus one and tagged fields. Shared by group/records.py
(__consumer_offsets) and transaction/transaction_log.py (__transaction_state)."""

from __future__ import annotations

import struct

from common.record import read_raw_varint
from proto.errors import InvalidRecordError

_I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A coordinator record (__consumer_offsets, __transaction_state) no Kafka version wrote (Kafka's
    IllegalStateException on load)."""


class Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def i8(self, v: int) -> Writer:
        self.out += _I8.pack(v)
        return self

    def i16(self, v: int) -> Writer:
        self.out += I16.pack(v)
        return self

    def i32(self, v: int) -> Writer:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> Writer:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is longer than an int16 length allows")
        self.i16(len(data))
        self.out += data
        return self

    def bytes_(self, v: bytes) -> Writer:
        self.i32(len(v))
        self.out += v
        return self



class Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record ends at byte {len(self.data)}, {n} more bytes wanted at {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def i16(self) -> int:
        return int(I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def _uvarint(self) -> int:
        try:
            value, self.pos = read_raw_varint(self.data, self.pos)
        except (IndexError, InvalidRecordError):
            raise RecordFormatError(f"bad varint at byte {self.pos}") from None
        return value

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self._uvarint() - 1  # compact: length + 1, 0 for null
        return self.i32() if wide else self.i16()

    def nullable_string(self) -> str | None:
        n = self._length(wide=False)
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"string is not UTF-8: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError(f"null where a string must be, at byte {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self._length(wide=True)
        if n < 0:
            raise RecordFormatError(f"null where bytes must be, at byte {self.pos}")
        return self._take(n)

    def nullable_array_length(self) -> int | None:
        n = self._length(wide=True)
        return None if n < 0 else n

    def array_length(self) -> int:
        n = self.nullable_array_length()
        if n is None:
            raise RecordFormatError(f"null array at byte {self.pos}")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self._uvarint()):
                self._uvarint()  # tag
                self._take(self._uvarint())
