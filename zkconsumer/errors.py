"""The one exception hierarchy of zkconsumer, and the registry of Kafka 0.7 broker error codes.

Why one hierarchy: a caller that wants "anything zkconsumer raised" catches `ZkConsumerError`;
a caller that wants to react to one condition catches its class.  Nothing from a lower library
(`struct.error`, `zlib.error`, kazoo's exceptions, `OSError` from a socket) crosses a public
boundary untranslated: every layer re-raises with ``raise ... from`` so the cause stays visible.

Two families mirror h11's split:

* `LocalProtocolError` -- *you* asked for something the 0.7 protocol cannot express (an
  illegal topic name, a partition that does not fit an int32, a payload above the size cap).
* `DecodeError` and its children -- the *peer* (a broker, a log file, a producer) sent bytes
  that are not valid 0.7; every one carries the byte ``offset`` where decoding failed.

Broker errors (the int16 codes of ``common/ErrorMapping.scala``) are `BrokerError` subclasses
registered by code; `BrokerError.for_code` falls back to `UnknownBrokerError` so a code we have
never seen still becomes a typed, catchable error.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BrokerConnectionError",
    "BrokerError",
    "BrokerStartupError",
    "CompressionError",
    "ConfigurationError",
    "ConnectionClosedError",
    "ConsumerError",
    "ConsumerTimeoutError",
    "CorruptMessageError",
    "CorruptSegmentError",
    "DecodeError",
    "DecompressionLimitError",
    "DeliveryError",
    "InvalidFetchSizeError",
    "InvalidMessageError",
    "InvalidMessageSizeError",
    "InvalidTopicError",
    "LocalProtocolError",
    "MessageTooLargeError",
    "MirrorError",
    "MissingExtraError",
    "NoBrokersAvailableError",
    "OffsetOutOfRangeError",
    "ProduceRejectedError",
    "ProducerError",
    "QueueFullError",
    "RebalanceFailedError",
    "SessionExpiredError",
    "SinkError",
    "TargetError",
    "TruncatedError",
    "UnknownBrokerError",
    "UnknownMagicError",
    "UsageError",
    "WrongPartitionError",
    "ZkConsumerError",
    "ZnodeDataError",
    "ZooKeeperError",
    "ZooKeeperUnreachableError",
]


class ZkConsumerError(Exception):
    """Root of every error zkconsumer raises on purpose."""


class ConfigurationError(ZkConsumerError, ValueError):
    """A configuration value (property, keyword argument, CLI flag) is missing or invalid.

    Raised up front, when the config object is built, never later in a background thread.
    The message names the offending key.
    """


class UsageError(ConfigurationError):
    """A command-line flag's value is unusable (e.g. ``--topic ..``): like an argparse error,
    the ``zkconsumer`` dispatcher turns it into one line and exit status 2."""


# --------------------------------------------------------------------------------------------
# Codec errors
# --------------------------------------------------------------------------------------------


class LocalProtocolError(ZkConsumerError, ValueError):
    """The caller asked the codec to encode something the 0.7 wire format cannot carry."""


class InvalidTopicError(LocalProtocolError):
    """A topic name the 0.7.2 broker would reject (REFERENCE §4.6), or a non-ASCII one.

    Non-ASCII names are refused because 0.7 frames strings by UTF-16 length but writes UTF-8
    bytes, so such a name misframes every request that carries it.
    """


class DecodeError(ZkConsumerError):
    """Bytes from a peer or a file are not valid Kafka 0.7.

    ``offset`` is the byte position (relative to the start of the buffer handed to the decoder,
    plus any ``base_offset`` the caller gave) where the bad structure begins.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        if offset is not None:
            message = f"{message} (at byte offset {offset})"
        super().__init__(message)


class TruncatedError(DecodeError):
    """A request or response frame ended before a field it declares.

    (A message *set* that ends inside its last message is not an error: see the codec.)
    """


class CorruptMessageError(DecodeError):
    """A message's CRC32 does not match its payload."""


class UnknownMagicError(DecodeError):
    """A message has a magic byte other than 0 or 1."""


class InvalidMessageSizeError(DecodeError):
    """A message length prefix is negative, shorter than the header, or absurdly large.

    This is also what a fetch at a misaligned byte offset usually produces.
    """


class MisalignedOffsetError(DecodeError):
    """A fetch offset is not a message boundary: it falls inside the message ``[before, after)``.

    0.7 offsets are byte positions and a 0.7 broker serves raw bytes from any position, so a
    bad committed offset (an import, a hand edit) reads as garbage.  Carries ``topic``,
    ``partition``, ``offset`` and the boundaries around it (``before``/``after``, None when
    unknown) so the message can say how to fix it (``zkconsumer offsets reset``).
    """

    def __init__(self, message: str, *, topic: str, partition: object, offset: int,
                 before: int | None = None, after: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.before = before
        self.after = after
        super().__init__(message)
        self.offset = offset


class CompressionError(DecodeError):
    """A compressed wrapper's payload cannot be decompressed, or names an unknown codec."""


class DecompressionLimitError(CompressionError):
    """A compressed wrapper would inflate beyond the configured cap (a decompression bomb)."""


class CorruptSegmentError(DecodeError):
    """A broker segment file (``<log.dir>/<topic>-<p>/NNN.kafka``) holds invalid 0.7 data.

    Carries ``path`` (the file), ``position`` (byte position inside that file) and ``offset``
    (the partition byte offset = segment start + position), so an operator can cut the file
    there or skip to the next segment.  The codec error that found it is the ``__cause__``.
    """

    def __init__(self, message: str, *, path: str, position: int, offset: int) -> None:
        self.path = path
        self.position = position
        super().__init__(f"{message} in {path} at file position {position}", offset)


# --------------------------------------------------------------------------------------------
# Broker errors (int16 codes on the wire)
# --------------------------------------------------------------------------------------------


class BrokerError(ZkConsumerError):
    """An error code returned by a 0.7 broker in a fetch, multifetch or offsets response.

    Subclasses set ``code`` and ``retriable``; `for_code` maps a wire code to an instance.
    """

    code: ClassVar[int] = -1
    retriable: ClassVar[bool] = False
    _registry: ClassVar[dict[int, type[BrokerError]]] = {}

    def __init__(self, message: str = "", *, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = []
        if topic is not None:
            where.append(f"topic={topic}")
        if partition is not None:
            where.append(f"partition={partition}")
        if offset is not None:
            where.append(f"offset={offset}")
        text = message or self.__class__.__doc__.strip().splitlines()[0]  # type: ignore[union-attr]
        if where:
            text = f"{text} [{', '.join(where)}]"
        super().__init__(f"broker error {self.code}: {text}")

    @staticmethod
    def register(cls: type[BrokerError]) -> type[BrokerError]:
        """Class decorator: make ``cls`` the error for its ``code``."""
        BrokerError._registry[cls.code] = cls
        return cls

    @staticmethod
    def for_code(code: int, message: str = "", **where: object) -> BrokerError:
        """The typed error for a wire code; unknown codes give `UnknownBrokerError`."""
        cls = BrokerError._registry.get(code)
        if cls is None:
            err: BrokerError = UnknownBrokerError(
                message or f"unknown error code {code}", **where  # type: ignore[arg-type]
            )
            err.wire_code = code  # type: ignore[attr-defined]
            return err
        return cls(message, **where)  # type: ignore[arg-type]


@BrokerError.register
class UnknownBrokerError(BrokerError):
    """The broker hit an unexpected server-side exception (code -1), e.g. an illegal topic."""

    code = -1


@BrokerError.register
class OffsetOutOfRangeError(BrokerError):
    """The requested offset is before the log start or past the flushed end (code 1)."""

    code = 1
    retriable = False


@BrokerError.register
class InvalidMessageError(BrokerError):
    """The broker found an invalid message (code 2)."""

    code = 2


@BrokerError.register
class WrongPartitionError(BrokerError):
    """The partition does not exist on that broker (code 3, InvalidPartitionException)."""

    code = 3


@BrokerError.register
class InvalidFetchSizeError(BrokerError):
    """The broker rejected the fetch size (code 4, InvalidMessageSizeException)."""

    code = 4


# --------------------------------------------------------------------------------------------
# Connection / client errors
# --------------------------------------------------------------------------------------------


class BrokerConnectionError(ZkConsumerError, ConnectionError):
    """Could not connect to, send to or read from a broker (timeouts included)."""

    def __init__(self, message: str, *, host: str | None = None, port: int | None = None) -> None:
        self.host = host
        self.port = port
        if host is not None:
            message = f"{message} [{host}:{port}]"
        super().__init__(message)


class ConnectionClosedError(BrokerConnectionError):
    """The broker closed the connection.  After a produce this means it rejected the request."""


class ProduceRejectedError(ZkConsumerError):
    """A confirmed produce found the socket closed: the broker rejected the message set.

    A 0.7 broker never answers a produce; it closes the connection on a bad one (invalid
    partition or topic, CRC mismatch, unknown codec).  Only confirmed produce can see that.
    """

    def __init__(self, message: str, *, topic: str | None = None,
                 partition: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        super().__init__(message)


class MessageTooLargeError(ZkConsumerError):
    """One message is larger than the largest fetch size allowed (or than ``max.message.size``).

    Carries where it is, so the operator can raise the cap or skip it deliberately.
    """

    def __init__(self, message: str, *, topic: str | None = None, partition: object = None,
                 offset: int | None = None, size: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.size = size
        super().__init__(message)


class NoBrokersAvailableError(ZkConsumerError):
    """No live broker is registered (or reachable) for the request."""


# --------------------------------------------------------------------------------------------
# Producer errors
# --------------------------------------------------------------------------------------------


class ProducerError(ZkConsumerError):
    """Base of producer-side failures."""


class QueueFullError(ProducerError):
    """The async producer's queue is full and the enqueue policy says not to wait."""


class DeliveryError(ProducerError):
    """Messages could not be delivered after the configured retries.

    ``messages`` holds what was not delivered so the caller can decide; nothing is dropped
    silently.
    """

    def __init__(self, message: str, messages: object = None) -> None:
        self.messages = messages
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# ZooKeeper / group errors
# --------------------------------------------------------------------------------------------


class ZooKeeperError(ZkConsumerError):
    """A ZooKeeper operation failed (kazoo's exceptions are translated to this family)."""


class SessionExpiredError(ZooKeeperError):
    """The ZooKeeper session expired; its ephemeral znodes are gone."""


class ZooKeeperAuthError(ZooKeeperError):
    """ZooKeeper refused our credentials or TLS (or we refused its certificate), or an ACL
    denied an operation (NoAuth): retrying with the same settings cannot help."""


class ZooKeeperUnreachableError(ZooKeeperError):
    """No ZooKeeper server of the connect string answered within ``zk.connectiontimeout.ms``.

    Retriable: a long-running command keeps trying at start-up (`zk.startup.start_when_reachable`);
    a one-shot command reports it.  Not raised for a host that does not resolve, a missing
    chroot or refused credentials: those are settings to fix.
    """


class ZnodeDataError(ZooKeeperError):
    """A znode holds data that is not in the documented 0.7 format.

    Carries ``path`` and the raw ``data`` so logs show exactly what was found.
    """

    def __init__(self, message: str, *, path: str, data: bytes | None) -> None:
        self.path = path
        self.data = data
        super().__init__(f"{message} [znode {path} = {data!r}]")


class ConsumerError(ZkConsumerError):
    """Base of consumer-group failures."""


class RebalanceFailedError(ConsumerError):
    """The consumer could not rebalance within ``rebalance.retries.max`` attempts."""


class ConsumerTimeoutError(ConsumerError, TimeoutError):
    """No message arrived within ``consumer.timeout.ms``; the consumer stays usable."""


# --------------------------------------------------------------------------------------------
# Dev broker errors
# --------------------------------------------------------------------------------------------


class BrokerStartupError(ZkConsumerError):
    """The dev broker cannot start: its broker id is registered by someone else, or its log
    directory is inconsistent (segments that do not join up), or its port is taken."""


class MissingExtraError(ZkConsumerError, ImportError):
    """A command or API needs an optional extra that is not installed (``zkconsumer[mirror]``
    for confluent-kafka, ``zkconsumer[spark]`` for pyspark and pyarrow).

    Not a bug and not a setting: the message is one line naming the package to install
    (`zkconsumer.extras` builds it).  An `ImportError` too, so ``except ImportError`` around an
    optional import keeps working.  ``extra`` and ``module`` say what is missing.
    """

    def __init__(self, message: str, *, extra: str, module: str) -> None:
        super().__init__(message)
        self.extra = extra
        self.module = module


# --------------------------------------------------------------------------------------------
# Mirror errors (zkconsumer mirror: 0.7 -> modern Kafka / 0.7)
# --------------------------------------------------------------------------------------------


class MirrorError(ZkConsumerError):
    """Base of ``zkconsumer mirror`` failures that are not a plain configuration error."""


class TargetError(MirrorError):
    """The target cluster cannot take what the mirror must write.

    Raised for conditions that retrying cannot cure (a target topic that does not exist and
    may not be created, a message the target client refuses locally).  Transient delivery
    failures are *not* raised: the mirror retries them with backoff and never skips.
    """


# --------------------------------------------------------------------------------------------
# Daemon errors (``zkconsumer run``)
# --------------------------------------------------------------------------------------------


class SinkError(ZkConsumerError):
    """The daemon's sink cannot take messages: an output file cannot be opened or written, an
    ``--exec`` command cannot be started, a ``--handler`` cannot be imported.

    The daemon stops fetching, commits what the sink acknowledged before the failure and exits
    non-zero; nothing unacknowledged is committed.
    """
