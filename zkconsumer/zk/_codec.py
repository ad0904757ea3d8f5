"""Decoding helpers shared by the znode value parsers (`paths`, `topic_count`).

Znode values are UTF-8 strings written by Scala; numbers are parsed by Scala with
``String.toInt``/``toLong``.  These helpers turn any deviation into `ZnodeDataError`.
"""

from __future__ import annotations

import re

from zkconsumer.errors import ZnodeDataError

# Java int / long ranges: Scala parses these values with String.toInt / toLong.
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# ASCII digits only: Python's int() would also take non-ASCII digits, " 7" or "1_0", which
# no Scala reader writes and which would hide corruption.
DECIMAL = re.compile(r"[0-9]+")


def text_value(path: str, data: bytes | None, what: str) -> str:
    """Decode a znode value as Scala's ZKStringSerializer does (UTF-8), or raise."""
    if data is None:
        raise ZnodeDataError(f"{what}: znode has null data", path=path, data=data)
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZnodeDataError(f"{what}: not UTF-8", path=path, data=data) from exc


def decimal_value(path: str, data: bytes | None, text: str, what: str, maximum: int) -> int:
    """A non-negative decimal in ``[0, maximum]`` (ASCII digits only), or raise."""
    if not DECIMAL.fullmatch(text):
        raise ZnodeDataError(f"{what}: not a non-negative decimal integer", path=path, data=data)
    value = int(text)
    if value > maximum:
        raise ZnodeDataError(f"{what}: {value} exceeds {maximum}", path=path, data=data)
    return value
