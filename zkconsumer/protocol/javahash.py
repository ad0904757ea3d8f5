"""Java ``String.hashCode`` and the 0.7 ``DefaultPartitioner``, so keys route like Scala's.

The Scala producer picks ``math.abs(key.hashCode) % numPartitions`` (producer/
DefaultPartitioner.scala).  For String keys ``hashCode`` is ``h = 31*h + c`` over the UTF-16
code units (characters outside the BMP count as two surrogates), wrapped to signed 32 bits.

Two deliberate choices where Scala's behaviour cannot be reproduced:

* ``math.abs(Int.MinValue)`` is still negative in Java, so Scala would compute a negative
  partition and throw.  We return ``2**31 % n`` instead (the mathematically absolute value),
  e.g. for the key ``"polygenelubricants"``.
* For ``bytes`` keys Scala calls ``byte[].hashCode``, the JVM *identity* hash: effectively
  random per object, so no Python code can match it.  We decode the bytes as UTF-8 (invalid
  sequences become U+FFFD, as ``new String(bytes, "UTF-8")`` does) and hash the text, so a
  ``bytes`` key routes exactly like the same key sent as a Java String.
"""

from __future__ import annotations

import struct

from zkconsumer.errors import LocalProtocolError

__all__ = ["default_partition", "java_string_hashcode"]

_MIN_INT = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()`` of ``s``: signed 32-bit, over UTF-16 code units."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(units) // 2}H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def default_partition(key: str | bytes, num_partitions: int) -> int:
    """The partition index 0.7's DefaultPartitioner gives ``key`` (see module docstring)."""
    if num_partitions <= 0:
        raise LocalProtocolError(f"num_partitions must be positive, got {num_partitions}")
    text = key if isinstance(key, str) else bytes(key).decode("utf-8", "replace")
    h = java_string_hashcode(text)
    if h == _MIN_INT:
        return (2**31) % num_partitions
    return abs(h) % num_partitions
