"""Small files beside a Spark output, through the filesystem Spark itself writes with.

Job: `zkconsumer export` keeps its resume record (``_zkconsumer_offsets.json``) in the output
directory.  The output may be any location Spark can write: a local path, ``file://``,
``hdfs://``, ``s3a://``...  Python's ``pathlib`` understands only the first, and on a multi-host
cluster even a local path is the *executors'* disks.  So the record is read and written with the
Hadoop ``FileSystem`` of the driver's JVM (``Path(uri).getFileSystem(hadoopConfiguration)``),
the same code and configuration Spark's file sources use, which knows every scheme Spark does.

Invariants
    * `OutputDir.uri` is the fully qualified location (``scheme://authority/abs/path``); it is
      handed to Spark's ``save()`` too, so the data and the record can never land apart.
    * A path without a scheme resolves as Spark resolves it: on the default filesystem
      (``fs.defaultFS``); a relative one, if that filesystem is the local one, against the
      driver's current working directory (this process's ``os.getcwd()``; the JVM's own
      ``user.dir`` is frozen when the session starts), else against the filesystem's working
      directory (``/user/<name>`` on HDFS).
    * `OutputDir.write_text` is atomic where the filesystem's rename is (local, HDFS): a temp
      file in the same directory, then a rename over the old file.  Where rename refuses to
      replace (HDFS), the old file is deleted first: a crash in between leaves the temp file
      and no record, never a half-written one.
    * Local files go through the raw local filesystem: no ``.crc`` side files, and a record
      edited by hand is not refused for a stale checksum.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from zkconsumer.errors import ConfigurationError, ZkConsumerError

__all__ = ["OutputDir", "read_text"]


def _resolve(spark: Any, location: str) -> tuple[Any, Any]:
    """(filesystem, qualified Path) of ``location`` as Spark resolves it (see the module)."""
    if not location:
        raise ConfigurationError("an output or offsets location is empty")
    jvm = spark._jvm
    try:
        path = jvm.org.apache.hadoop.fs.Path(location)
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        if (path.toUri().getScheme() is None and not path.isAbsolute()
                and fs.getUri().getScheme() == "file"):
            path = jvm.org.apache.hadoop.fs.Path(os.path.abspath(location))
        qualified = fs.makeQualified(path)
    except Exception as exc:  # py4j errors: an unknown scheme, a malformed URI
        raise ConfigurationError(f"{location}: {_java_message(exc)}") from exc
    checksummed = jvm.java.lang.Class.forName("org.apache.hadoop.fs.ChecksumFileSystem")
    return (fs.getRawFileSystem() if checksummed.isInstance(fs) else fs), qualified


def read_text(spark: Any, location: str) -> str | None:
    """The UTF-8 text of the file at ``location`` (a path or URI), or None if it is missing."""
    fs, path = _resolve(spark, location)
    return _read(spark._jvm, fs, path)


def _read(jvm: Any, fs: Any, path: Any) -> str | None:
    try:
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
    except Exception as exc:
        raise ConfigurationError(f"cannot read {path.toString()}: "
                                 f"{_java_message(exc)}") from exc
    return bytes(data).decode("utf-8")


class OutputDir:
    """A directory on a Hadoop filesystem, as seen from the driver of ``spark``."""

    def __init__(self, spark: Any, location: str) -> None:
        self._jvm = spark._jvm
        self._fs, self._path = _resolve(spark, location)
        self.uri: str = str(self._path.toString())

    def __repr__(self) -> str:
        return f"OutputDir({self.uri!r})"

    def child(self, name: str) -> str:
        """The qualified URI of ``name`` inside this directory."""
        return str(self._child(name).toString())

    def _child(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._path, name)

    def read_text(self, name: str) -> str | None:
        """The UTF-8 text of ``name`` in this directory, or None if there is no such file."""
        return _read(self._jvm, self._fs, self._child(name))

    def write_text(self, name: str, text: str) -> None:
        """Replace ``name`` in this directory with ``text`` (UTF-8), atomically (see module)."""
        dst = self._child(name)
        tmp = self._child(f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            self._fs.mkdirs(self._path)
            stream = self._fs.create(tmp, True)
            try:
                stream.write(bytearray(text.encode("utf-8")))
            finally:
                stream.close()
            if not self._fs.rename(tmp, dst):
                # HDFS (and some object stores) refuse to rename over an existing file.
                if self._fs.exists(dst):
                    self._fs.delete(dst, False)
                if not self._fs.rename(tmp, dst):
                    raise OSError(f"rename {tmp.toString()} -> {dst.toString()} failed")
        except Exception as exc:
            raise ZkConsumerError(f"cannot write {dst.toString()}: "
                                     f"{_java_message(exc)}") from exc


def _java_message(exc: BaseException) -> str:
    """The Java exception's own message (py4j prefixes pages of context), else ``str(exc)``."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return f"{java.getClass().getSimpleName()}: {java.getMessage()}"
        except Exception:  # the gateway may be gone
            pass
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
