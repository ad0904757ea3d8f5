"""Consumer-group offsets tooling: export, import and reset (ExportZkOffsets & co., made safe).

Job: move a group's committed offsets (``/consumers/<g>/offsets/<t>/<B-P>`` = next byte offset,
REFERENCE §1) in and out of files, and set them to the log's earliest/latest like
``UpdateOffsetsInZK``.  The file formats:

* **scala** (the default, byte-compatible with tools/ExportZkOffsets.scala): one line per
  partition, ``/consumers/<g>/offsets/<t>/<B-P>:<offset>``.  Files written by the Scala tool
  import here and ours import with the Scala ImportZkOffsets.
* **json**: ``{"group": "<g>", "offsets": {"<t>": {"<B-P>": <offset>}}}`` (a list of such
  objects when several groups are exported).

What the Scala tools got wrong and this module refuses to do:

* ImportZkOffsets wrote whatever the file said -- an empty or non-numeric value then crashes
  every consumer of the group at ``toLong``.  Here the **whole file is validated first**; any
  bad line is reported with its line number and **nothing** is written.
* It wrote under the feet of running consumers, whose next autocommit silently overwrote the
  import.  Here a group with live members (``/consumers/<g>/ids`` non-empty) is refused unless
  ``force``.
* UpdateOffsetsInZK trusted its input.  `plan_reset` checks every value against the broker's
  current ``[earliest, latest]`` (offsets requests ``-2`` / ``-1``), so no committed offset
  points outside the log.

Every write path first computes a list of `Change` (old -> new), so ``--dry-run`` shows exactly
what a real run would do.

An import may name topics or partitions this cluster does not (yet) have in ``/brokers/topics``:
they are written anyway (importing before the topic exists is a normal migration step, and the
Scala tool does it), but `import_warnings` names each one so a typo does not pass unnoticed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from zkconsumer.client import SimpleConsumer
from zkconsumer.errors import (
    ConfigurationError,
    NoBrokersAvailableError,
    ZnodeDataError,
)
from zkconsumer.migrate.boundaries import boundary_problem
from zkconsumer.protocol import EARLIEST_TIME, LATEST_TIME
from zkconsumer.zk.offsets import commit_offset, read_group_offsets, read_offset
from zkconsumer.zk.paths import CONSUMERS, consumer_ids_path, offset_path, parse_partition_name
from zkconsumer.zk.registry import read_brokers, read_partition_names, read_topic_partitions
from zkconsumer.zk.session import ZkSession

__all__ = [
    "Change",
    "GroupOffsets",
    "apply_changes",
    "export_groups",
    "format_json",
    "format_scala",
    "import_warnings",
    "list_groups",
    "live_members",
    "parse_offsets_text",
    "plan_import",
    "plan_reset",
]

#: ``{group: {topic: {"B-P": offset}}}``
GroupOffsets = dict[str, dict[str, dict[str, int]]]

_LINE = re.compile(r"^/consumers/([^/]+)/offsets/([^/]+)/([^/:]+)$")
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class Change:
    """One partition's offset before and after (``old`` None: no offset was committed)."""

    group: str
    topic: str
    partition: str
    old: int | None
    new: int

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def describe(self) -> str:
        old = "none" if self.old is None else str(self.old)
        note = "" if self.changed else " (unchanged)"
        return f"{self.group} {self.topic} {self.partition}: {old} -> {self.new}{note}"


# -- export ---------------------------------------------------------------------------------

def list_groups(session: ZkSession) -> list[str]:
    return session.get_children(CONSUMERS)


def export_groups(session: ZkSession, groups: Iterable[str] | None = None, *,
                  skipped: list[ZnodeDataError] | None = None) -> GroupOffsets:
    """Committed offsets of ``groups`` (all groups if None).  Unreadable znodes are skipped
    with a warning (see `zkconsumer.zk.offsets`): exporting garbage would poison the import.
    Each skipped one's error is appended to ``skipped`` (the CLI then exits non-zero)."""
    names = list(groups) if groups is not None else list_groups(session)
    return {g: read_group_offsets(session, g, strict=False, skipped=skipped) for g in names}


def format_scala(offsets: GroupOffsets) -> str:
    """ExportZkOffsets lines, sorted (group, topic, partition) so exports diff cleanly."""
    lines = [f"{offset_path(g, t, p)}:{n}\n"
             for g in sorted(offsets) for t in sorted(offsets[g])
             for p, n in sorted(offsets[g][t].items())]
    return "".join(lines)


def format_json(offsets: GroupOffsets) -> str:
    docs = [{"group": g, "offsets": {t: dict(sorted(offsets[g][t].items()))
                                     for t in sorted(offsets[g])}} for g in sorted(offsets)]
    return json.dumps(docs[0] if len(docs) == 1 else docs, indent=2) + "\n"


# -- parsing ----------------------------------------------------------------------------------

def _check_partition(name: str) -> bool:
    try:
        parse_partition_name(name)
    except ZnodeDataError:
        return False
    return True


def _check_offset(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= _LONG_MAX else None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        n = int(value)
        return n if n <= _LONG_MAX else None
    return None


def _parse_scala(text: str, source: str) -> GroupOffsets:
    result: GroupOffsets = {}
    errors: list[str] = []
    seen: dict[tuple[str, str, str], int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        path, sep, value = line.rpartition(":")
        match = _LINE.match(path) if sep else None
        if not match:
            errors.append(f"{source}:{lineno}: not /consumers/<group>/offsets/<topic>/<B-P>:"
                          f"<offset>: {raw!r}")
            continue
        group, topic, part = match.groups()
        offset = _check_offset(value.strip())
        if not _check_partition(part):
            errors.append(f"{source}:{lineno}: partition {part!r} is not <brokerId>-<partId>")
        elif offset is None:
            errors.append(f"{source}:{lineno}: offset {value!r} is not a non-negative integer")
        elif (group, topic, part) in seen:
            errors.append(f"{source}:{lineno}: {group}/{topic}/{part} already set on line "
                          f"{seen[(group, topic, part)]}")
        else:
            seen[(group, topic, part)] = lineno
            result.setdefault(group, {}).setdefault(topic, {})[part] = offset
    if errors:
        raise ConfigurationError("invalid offsets file, nothing written:\n  "
                                 + "\n  ".join(errors))
    return result


def _json_line(text: str, needle: str) -> int:
    """1-based line of the first occurrence of ``needle`` (for error messages)."""
    pos = text.find(needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 0


def _parse_json(text: str, source: str) -> GroupOffsets:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{source}: invalid JSON: {exc}") from exc
    docs = doc if isinstance(doc, list) else [doc]
    result: GroupOffsets = {}
    errors: list[str] = []
    for i, d in enumerate(docs):
        if (not isinstance(d, dict) or not isinstance(d.get("group"), str) or not d["group"]
                or "/" in d["group"] or not isinstance(d.get("offsets"), dict)):
            errors.append(f"{source}: entry {i}: expected "
                          '{"group": "<g>", "offsets": {"<topic>": {"<B-P>": <offset>}}}')
            continue
        group = d["group"]
        for topic, parts in d["offsets"].items():
            if not isinstance(parts, dict) or not topic or "/" in topic:
                errors.append(f"{source}:{_json_line(text, json.dumps(topic))}: topic "
                              f"{topic!r} must map to {{\"<B-P>\": <offset>}}")
                continue
            for part, value in parts.items():
                line = _json_line(text, json.dumps(part))
                offset = _check_offset(value)
                if not _check_partition(part):
                    errors.append(f"{source}:{line}: {group}/{topic}: partition {part!r} is "
                                  "not <brokerId>-<partId>")
                elif offset is None or not isinstance(value, int):
                    errors.append(f"{source}:{line}: {group}/{topic}/{part}: offset {value!r} "
                                  "is not a non-negative integer")
                else:
                    result.setdefault(group, {}).setdefault(topic, {})[part] = offset
    if errors:
        raise ConfigurationError("invalid offsets file, nothing written:\n  "
                                 + "\n  ".join(errors))
    return result


def parse_offsets_text(text: str, source: str = "<offsets>") -> GroupOffsets:
    """Parse either format (JSON if it starts with ``{`` or ``[``); validate every entry.

    All problems are collected and raised together as one `ConfigurationError` with line
    numbers, so an operator fixes the file in one go and nothing is half-imported.
    """
    stripped = text.lstrip()
    if not stripped:
        raise ConfigurationError(f"{source}: the offsets file is empty, nothing written")
    if stripped[0] in "{[":
        return _parse_json(text, source)
    return _parse_scala(text, source)


# -- import / reset -------------------------------------------------------------------------

def live_members(session: ZkSession, group: str) -> list[str]:
    """Registered consumer ids of ``group`` (``/consumers/<g>/ids``)."""
    return session.get_children(consumer_ids_path(group))


def _refuse_live(session: ZkSession, groups: Iterable[str], force: bool) -> None:
    for group in groups:
        members = live_members(session, group)
        if members and not force:
            raise ConfigurationError(
                f"group {group} has {len(members)} live member(s) ({', '.join(members[:3])}"
                f"{', ...' if len(members) > 3 else ''}): their next commit would overwrite "
                "the new offsets; stop them first or pass --force")


def plan_import(session: ZkSession, offsets: GroupOffsets, *, force: bool = False
                ) -> list[Change]:
    """The changes an import would make (after the live-member check)."""
    _refuse_live(session, offsets, force)
    changes = []
    for group in sorted(offsets):
        for topic in sorted(offsets[group]):
            for part, new in sorted(offsets[group][topic].items()):
                try:
                    old = read_offset(session, group, topic, part)
                except ZnodeDataError:
                    old = None  # garbage is replaced, which is the point of the import
                changes.append(Change(group, topic, part, old, new))
    return changes


def import_warnings(session: ZkSession, changes: Iterable[Change]) -> list[str]:
    """One line per imported topic / partition that ``/brokers/topics`` does not list."""
    by_topic: dict[str, set[str]] = {}
    for c in changes:
        by_topic.setdefault(c.topic, set()).add(c.partition)
    warnings = []
    for topic in sorted(by_topic):
        try:
            registered = set(read_partition_names(session, topic, strict=True))
        except ZnodeDataError as exc:
            warnings.append(f"topic {topic}: cannot check its partitions ({exc})")
            continue
        if not registered:
            warnings.append(f"topic {topic} is not registered in /brokers/topics (yet): its "
                            "offsets are written anyway")
            continue
        missing = sorted(by_topic[topic] - registered)
        if missing:
            warnings.append(f"topic {topic} has no partition {', '.join(missing)} in "
                            "/brokers/topics: those offsets are written anyway")
    return warnings


def apply_changes(session: ZkSession, changes: Iterable[Change]) -> int:
    """Write the changed offsets (persistent znodes, null-data parents).  Returns the count."""
    written = 0
    for c in changes:
        if c.changed:
            commit_offset(session, c.group, c.topic, c.partition, c.new)
            written += 1
    return written


def log_ranges(session: ZkSession, topic: str, *, socket_timeout: float = 10.0
               ) -> dict[str, tuple[int, int]]:
    """``{"B-P": (earliest, latest)}`` for every partition of ``topic`` in /brokers/topics."""
    return {part: (lo, hi) for part, (lo, hi, _) in _partition_logs(session, topic,
                                                                     socket_timeout).items()}


def _partition_logs(session: ZkSession, topic: str, socket_timeout: float
                    ) -> dict[str, tuple[int, int, tuple[str, int]]]:
    counts = read_topic_partitions(session, topic)
    if not counts:
        raise ConfigurationError(f"topic {topic} is not registered in /brokers/topics")
    brokers = read_brokers(session)
    ranges: dict[str, tuple[int, int, tuple[str, int]]] = {}
    for bid, count in counts.items():
        info = brokers.get(bid)
        if info is None:
            raise NoBrokersAvailableError(
                f"broker {bid} (holding {topic}) is not live; cannot read its log range")
        with SimpleConsumer(info.host, info.port, socket_timeout=socket_timeout) as consumer:
            for p in range(count):
                earliest = consumer.offsets(topic, p, EARLIEST_TIME, 1)
                latest = consumer.offsets(topic, p, LATEST_TIME, 1)
                ranges[f"{bid}-{p}"] = (earliest[0] if earliest else 0,
                                        latest[0] if latest else 0, (info.host, info.port))
    return ranges


def _boundary(address: tuple[str, int], topic: str, part: str, offset: int,
              socket_timeout: float) -> tuple[str | None, str | None]:
    with SimpleConsumer(*address, socket_timeout=socket_timeout) as consumer:
        return boundary_problem(consumer, topic, parse_partition_name(part)[1], offset)


def plan_reset(session: ZkSession, group: str, topic: str, to: str | GroupOffsets, *,
               force: bool = False, socket_timeout: float = 10.0,
               notes: list[str] | None = None) -> list[Change]:
    """UpdateOffsetsInZK: ``to`` = ``"earliest"``, ``"latest"`` or parsed file offsets.

    Every partition of the topic is set for earliest/latest; with a file only the partitions
    it lists for this group and topic.  File values outside the log's current
    ``[earliest, latest]``, values that are not a message boundary (the rule of
    `zkconsumer.migrate.boundaries`, shared with import) and partitions the topic does not
    have are errors naming them.  What could not be checked is appended to ``notes``.
    """
    _refuse_live(session, [group], force)
    logs = _partition_logs(session, topic, socket_timeout)
    ranges = {part: (lo, hi) for part, (lo, hi, _) in logs.items()}
    if isinstance(to, str):
        if to not in ("earliest", "latest"):
            raise ConfigurationError(f"--to must be earliest, latest or a file, not {to!r}")
        wanted = {p: (lo if to == "earliest" else hi) for p, (lo, hi) in ranges.items()}
    else:
        wanted = dict(to.get(group, {}).get(topic, {}))
        if not wanted:
            raise ConfigurationError(f"the file has no offsets for group {group} topic {topic}")
        problems = []
        for part, value in sorted(wanted.items()):
            if part not in ranges:
                problems.append(f"{part}: topic {topic} has no such partition")
            elif not ranges[part][0] <= value <= ranges[part][1]:
                problems.append(f"{part}: {value} is outside the log "
                                f"[{ranges[part][0]}, {ranges[part][1]}]")
            elif ranges[part][0] < value < ranges[part][1]:
                problem, note = _boundary(logs[part][2], topic, part, value, socket_timeout)
                if problem:
                    problems.append(f"{part}: {problem}")
                if note and notes is not None:
                    notes.append(f"{group} {topic} {part}: {note}")
        if problems:
            raise ConfigurationError(
                f"offsets for {group}/{topic} rejected, nothing written:\n  "
                + "\n  ".join(problems))
    changes = []
    for part, new in sorted(wanted.items()):
        try:
            old = read_offset(session, group, topic, part)
        except ZnodeDataError:
            old = None
        changes.append(Change(group, topic, part, old, new))
    return changes
