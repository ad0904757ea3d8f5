"""One seeded soak run: a group under load while faults are injected, then the count.

`run_soak` starts a `SoakCluster` (own ZooKeeper behind a proxy, dev broker processes), a
consumer group of ``zkconsumer run`` members (one ``--output`` member with two streams, one
``--exec``, one ``--handler``; all write jsonl), a second group with one lone ``--output``
member with two streams (a lone member gets its partitions back after its session expired:
issue 11's repro A) and, with ``mirror``, a group of two ``zkconsumer mirror`` members
copying the topic to a second topic of the same cluster (``kafka07://``, confirmed
produce).  A `Load` produces numbered messages throughout.

Faults (``random.Random(seed)`` picks their order, targets and gaps; the same seed gives the
same schedule): ``member-kill9`` (crash, then restart), ``member-term`` (clean stop, then
restart), ``member-stop`` (SIGSTOP until ZooKeeper expired the session, then SIGCONT;
``lone-stop``: the same to the lone member), ``broker-kill9`` (kill -9, then restart on the
same port and log dir), ``zk-kill9`` (kill -9 of ZooKeeper, restart on the same port and
data dir), ``zk-drop`` (the proxy closes every member's ZooKeeper connection; sessions
survive), and the opt-in ``member-start-stop`` (see `EXTRA_FAULTS`).  ``faults`` are shuffled
(each once); with ``duration`` more are drawn until that many seconds passed since the
first; a membership change always follows the last ZooKeeper fault (a member that went deaf
shows only then).

After each fault the run waits until it has **recovered**: every group whole and caught up
past the log end measured when the fault ended (`Observer.group_problems`); the time is the
fault's recovery time, and the first non-200 ``/healthz`` of each member meanwhile is noted.
Not recovering within ``recovery_timeout`` is a failure (with the problems and the members'
log tails) and ends the fault phase; so is a member that exits on its own.  At the end the
load stops, the run waits for lag 0, checks every ``/healthz`` says 200, stops the members
with SIGTERM and counts (`soak_check.count`): lost, pending, duplicates against the bounds
of `soak_result.duplicate_bound`.
"""

from __future__ import annotations

import logging
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.bench.soak_check import Ends, Observer, count, read_log, read_records
from zkconsumer.bench.soak_load import Load
from zkconsumer.bench.soak_procs import Member, MemberSpec, SoakCluster, SoakSettings
from zkconsumer.bench.soak_result import (
    FaultRecord,
    SoakResult,
    duplicate_bound,
    fault_window,
    peak_rate,
)

__all__ = ["EXTRA_FAULTS", "FAULTS", "FaultRecord", "SoakConfig", "SoakResult", "run_soak"]

log = logging.getLogger(__name__)

FAULTS = ("member-kill9", "member-term", "member-stop", "lone-stop", "broker-kill9", "zk-kill9",
          "zk-drop")
#: Opt-in faults (``--fault NAME``), not in the default schedule: ``member-start-stop``
#: freezes a restarted member past its session while its first rebalance still waits.
EXTRA_FAULTS = ("member-start-stop",)
TOPIC, MIRRORED, GROUP, MIRROR_GROUP = "soak", "soak-copy", "soak-run", "soak-mirror"
LONE_GROUP = "soak-lone"


@dataclass(frozen=True)
class SoakConfig:
    seed: int
    workdir: Path
    faults: Sequence[str] = FAULTS
    duration: float = 0.0          # > 0: keep drawing faults until this many seconds passed
    rate: float = 1000.0           # messages per second produced
    mirror: bool = True
    brokers: int = 2
    partitions: int = 2            # per broker
    recovery_timeout: float = 40.0
    settle_timeout: float = 60.0
    settings: SoakSettings = field(default_factory=SoakSettings)


class _Run:
    def __init__(self, config: SoakConfig) -> None:
        self.c = config
        self.rng = random.Random(config.seed)
        self.result = SoakResult(config.seed, workdir=config.workdir)
        self.cluster = SoakCluster(config.workdir / "cluster", brokers=config.brokers,
                                   partitions=config.partitions,
                                   session_timeout_ms=config.settings.session_timeout_ms)
        s = config.settings
        specs = [MemberSpec("out", "output", GROUP, TOPIC, streams=2),
                 MemberSpec("exec", "exec", GROUP, TOPIC),
                 MemberSpec("handler", "handler", GROUP, TOPIC),
                 MemberSpec("lone", "output", LONE_GROUP, TOPIC, streams=2)]
        if config.mirror:
            specs += [MemberSpec(f"mirror{i}", "mirror", MIRROR_GROUP, TOPIC,
                                 target_topic=MIRRORED) for i in range(2)]
        self.members = [Member(spec, self.cluster, config.workdir, s) for spec in specs]
        self.groups = [GROUP, LONE_GROUP] + ([MIRROR_GROUP] if config.mirror else [])
        self.observer: Observer | None = None
        self.load: Load | None = None
        self._samples: list[tuple[float, dict[str, int]]] = []

    # --- waiting -------------------------------------------------------------------------
    def _wait_whole(self, what: str, timeout: float, *, ends: Ends | None = None,
                    lag0: bool = False, record: FaultRecord | None = None) -> float | None:
        """Seconds until the groups are whole (and caught up), or None after ``timeout``.
        With ``record``, the first non-200 ``/healthz`` of each member is noted in it."""
        assert self.observer is not None
        started = time.monotonic()
        problems: list[str] = ["not checked yet"]
        while time.monotonic() - started < timeout:
            self._sample()
            self._reap_unexpected()
            if record is not None:
                self._note_health(record)
            try:
                problems = self.observer.group_problems(self.groups, ends, lag0=lag0,
                                                        members=self._member_counts())
            except Exception as exc:  # ZooKeeper or a broker down: not whole yet
                problems = [f"cannot read the groups: {exc}"]
            if not problems:
                return time.monotonic() - started
            time.sleep(0.2)  # polling external processes, not a test sleep
        tails = "\n".join(f"--- {m.spec.name} ({m.log_file}):\n{m.log_tail(6)}"
                          for m in self.members)
        shown = "; ".join(problems[:8]) + (f" (+{len(problems) - 8} more)"
                                             if len(problems) > 8 else "")
        self.result.failures.append(f"{what}: not whole within {timeout:.0f}s: {shown}\n{tails}")
        return None

    def _note_health(self, record: FaultRecord) -> None:
        for m in self.members:
            if m.spec.name in record.unhealthy:
                continue
            health = m.health(timeout=0.3)
            if health is not None and health[0] != 200:
                record.unhealthy[m.spec.name] = f"{health[0]} {health[1][:120]}"

    def _member_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.members:
            if m.proc is not None:  # a member that gave up is not expected to be there
                counts[m.spec.group] = counts.get(m.spec.group, 0) + 1
        return counts

    def _sample(self) -> None:
        sizes: dict[str, int] = {}
        for m in self.members:
            if m.spec.kind != "mirror" and m.output.exists():
                sizes[m.spec.group] = sizes.get(m.spec.group, 0) + m.output.stat().st_size
        self._samples.append((time.monotonic(), sizes))

    def _reap_unexpected(self) -> None:
        for m in self.members:
            if m.proc is not None and m.proc.poll() is not None:
                code = m.proc.returncode
                m.exits.append(code)
                self.result.failures.append(
                    f"member {m.spec.name} exited on its own with status {code} "
                    f"(log {m.log_file}); last lines:\n{m.log_tail(4)}")
                if len(m.exits) <= 3:  # restart it, unless it keeps failing
                    m.start()
                else:
                    m.proc = None

    # --- faults --------------------------------------------------------------------------
    def _fault(self, kind: str) -> FaultRecord:
        at = time.time()
        if kind.startswith(("member-", "lone-")):
            m = self.members[3] if kind == "lone-stop" else self.rng.choice(self.members)
            target = m.spec.name
            if kind == "member-kill9":
                m.kill()
                m.start()
            elif kind == "member-term":
                m.terminate()
                m.start()
            elif kind == "member-start-stop":
                # crash, restart, and freeze the new process while its first rebalance waits
                # for the dead session's owner znodes: a session expiry *during* start-up
                m.kill()
                m.start()
                self._stop_past_session(m, registered=True)
            else:
                self._stop_past_session(m)
        elif kind == "broker-kill9":
            broker_id = self.rng.randrange(self.c.brokers)
            target = f"broker {broker_id}"
            self.cluster.kill_broker(broker_id)
            time.sleep(self.rng.uniform(0.2, 1.5))  # the outage
            self.cluster.restart_broker(broker_id)
        elif kind == "zk-kill9":
            target = "zookeeper"
            self.cluster.kill_zookeeper()
            time.sleep(self.rng.uniform(0.2, 1.0))  # the outage
            self.cluster.start_zookeeper()
        elif kind == "zk-drop":
            assert self.cluster.proxy is not None
            target = f"{self.cluster.proxy.drop_all()} connection(s)"
        else:
            raise ValueError(f"unknown fault {kind!r}")
        return FaultRecord(kind, target, at, time.time())

    def _stop_past_session(self, m: Member, *, registered: bool = False) -> None:
        """SIGSTOP ``m`` until ZooKeeper expired its session (its ids znode is gone: the
        server expires sessions on tick boundaries, so up to a tick after the timeout), then
        SIGCONT.  A session that does not expire within a bound is a failure.  With
        ``registered``, first wait until a just-started ``m`` registered (a new id)."""
        assert self.observer is not None
        before = self.observer.member_ids(m.spec.group)
        if registered:  # its own id only: the crashed predecessor's expires meanwhile
            deadline = time.monotonic() + 30
            while not (new := self.observer.member_ids(m.spec.group) - before):
                if time.monotonic() > deadline:
                    self.result.failures.append(f"member {m.spec.name} did not register")
                    return
                time.sleep(0.02)  # polling ZooKeeper
            before = new
        m.signal(signal.SIGSTOP)
        deadline = time.monotonic() + 3 * self.c.settings.session_timeout_ms / 1000 + 10
        try:
            while True:
                try:
                    if len(self.observer.member_ids(m.spec.group) & before) < len(before):
                        return
                except Exception:  # ZooKeeper hiccup: look again
                    pass
                if time.monotonic() > deadline:
                    self.result.failures.append(
                        f"member {m.spec.name}: its session did not expire while stopped")
                    return
                time.sleep(0.1)  # polling ZooKeeper
        finally:
            m.signal(signal.SIGCONT)

    def _schedule(self) -> Callable[[], str | None]:
        order = list(self.c.faults)
        self.rng.shuffle(order)
        # a member that went deaf after a ZooKeeper fault shows only at the next membership
        # change: make sure one follows the last ZooKeeper fault
        zk_at = [i for i, k in enumerate(order) if k.startswith("zk-")]
        if zk_at and not any(k.startswith("member-") for k in order[zk_at[-1]:]):
            order.append("member-term")
        deadline = time.monotonic() + self.c.duration

        def next_fault() -> str | None:
            if order:
                return order.pop(0)
            if time.monotonic() < deadline:
                return self.rng.choice(list(self.c.faults))
            return None
        return next_fault

    # --- the run -------------------------------------------------------------------------
    def run(self) -> SoakResult:
        started = time.monotonic()
        try:
            self._run()
        except Exception as exc:  # a component that cannot start again: a failure, counted
            log.exception("soak seed %s: harness error", self.c.seed)
            self.result.failures.append(f"harness error: {exc!r}")
        finally:
            self._teardown()
            self.result.seconds = time.monotonic() - started
        return self.result

    def _run(self) -> None:
        c, r = self.c, self.result
        self.cluster.start()
        self.cluster.register_topic(TOPIC)
        if c.mirror:
            self.cluster.register_topic(MIRRORED)
        self.observer = Observer(self.cluster.direct_connect)
        for m in self.members:
            m.start()
        if self._wait_whole("start", c.recovery_timeout) is None:
            return
        self.load = Load(self.cluster.direct_connect, TOPIC, rate=c.rate, seed=c.seed)
        self.load.start()
        if self._wait_whole("warm-up", c.recovery_timeout,
                            ends=self.observer.log_ends(self.groups)) is None:
            return
        next_fault = self._schedule()
        while (kind := next_fault()) is not None:
            time.sleep(self.rng.uniform(0.3, 1.5))  # load between faults
            record = self._fault(kind)
            r.faults.append(record)
            ends = self._ends()
            record.recovery = self._wait_whole(f"after {record.describe()}", c.recovery_timeout,
                                               ends=ends, record=record)
            if record.recovery is None:
                return
        self.load.stop()
        if self._wait_whole("final lag 0", c.settle_timeout, lag0=True) is not None:
            self._check_healthy()

    def _check_healthy(self) -> None:
        """At lag 0 with every member whole, every ``/healthz`` must say 200."""
        for m in self.members:
            health = m.health(timeout=2.0)
            if health is None:
                self.result.failures.append(f"member {m.spec.name}: /healthz did not answer")
            elif health[0] != 200:
                self.result.failures.append(f"member {m.spec.name}: /healthz {health[0]} "
                                            f"{health[1]} although the group is whole")

    def _ends(self) -> Ends | None:
        assert self.observer is not None
        deadline = time.monotonic() + self.c.recovery_timeout
        while time.monotonic() < deadline:
            try:
                ends = self.observer.log_ends(self.groups)
                if all(v is not None for v in ends.values()):
                    return ends
            except Exception:  # ZooKeeper still coming back
                pass
            time.sleep(0.2)
        return None

    def _teardown(self) -> None:
        r = self.result
        if self.load is not None and self.load.is_alive():
            try:
                self.load.stop()
            except Exception as exc:
                r.failures.append(str(exc))
        for m in self.members:
            try:
                code = m.terminate()
                if code not in (0, None):
                    r.failures.append(f"member {m.spec.name} exited {code} after SIGTERM; "
                                      f"log tail:\n{m.log_tail()}")
            except Exception as exc:
                r.failures.append(str(exc))
        try:
            self._count()
        except Exception as exc:
            r.failures.append(f"counting failed: {exc!r}")
        if self.observer is not None:
            self.observer.close()
        self.cluster.stop()

    def _count(self) -> None:
        r, c = self.result, self.c
        if self.load is None:
            return
        if self.load.error is not None:
            r.failures.append(f"load failed: {self.load.error!r}")
        produced = list(self.load.produced_at)
        source = read_log(self.cluster.direct_connect, TOPIC)
        assert self.observer is not None
        for name, group in (("run", GROUP), ("lone", LONE_GROUP)):
            paths = [m.output for m in self.members if m.spec.group == group]
            records, torn = read_records(paths, TOPIC)
            r.tallies[name] = count(produced, source, records,
                                    committed=self.observer.committed(group, TOPIC))
            r.tallies[name].torn = torn
        if c.mirror:
            target = read_log(self.cluster.direct_connect, MIRRORED)
            r.tallies["mirror"] = count(produced, source, target, by_id=True,
                                        committed=self.observer.committed(MIRROR_GROUP, TOPIC))
        self._bounds({"run": GROUP, "lone": LONE_GROUP, "mirror": MIRROR_GROUP})
        for name, t in r.tallies.items():
            window = self._window
            for gap in t.gaps:
                r.failures.append(f"{name}: {gap.describe()}; {window(gap.ids)}")
            for gap in t.pending:
                r.failures.append(f"{name}: never consumed (the group did not get there): "
                                  f"{gap.describe().replace(' lost ', ' pending ')}")
            if t.not_in_log:
                r.failures.append(f"{name}: {len(t.not_in_log)} confirmed id(s) not in the "
                                  f"log (producer side), e.g. {t.not_in_log[:5]}")
            if t.unknown:
                r.failures.append(f"{name}: {t.unknown} record(s) not in the log")
            if t.duplicates > r.bounds[name]:
                r.failures.append(f"{name}: {t.duplicates} duplicates exceed the bound "
                                  f"{r.bounds[name]}")
            if t.longest_replay > r.run_bounds[name]:
                r.failures.append(f"{name}: a replay of {t.longest_replay} consecutive "
                                  f"messages exceeds what one fault explains "
                                  f"({r.run_bounds[name]})")

    def _bounds(self, groups: dict[str, str]) -> None:
        """The duplicate bound of each tally (docs/operations.md, "Faults and recovery").

        Members hit per fault: the member itself for a member fault, every member of the
        group for a broker or ZooKeeper fault; one more term for the final stop.  The
        formula is `duplicate_bound`.
        """
        r, c, s = self.result, self.c, self.c.settings
        interval = s.commit_interval_ms / 1000
        for name, group in groups.items():
            if name not in r.tallies:
                continue
            paths = [m.output for m in self.members if m.spec.group == group]
            size = sum(p.stat().st_size for p in paths if p.exists())
            per_record = size / r.tallies[name].consumed if size and r.tallies[name].consumed \
                else 0.0
            samples = [(t, sizes.get(group, 0)) for t, sizes in self._samples]
            r.peak_rates[name] = peak_rate(samples, interval) / per_record if per_record else 0
        top = max(r.peak_rates.values(), default=0.0)
        for name, group in groups.items():
            if name not in r.tallies:
                continue
            rate = r.peak_rates.get(name) or top  # the mirror writes no file: the top rate
            r.peak_rates[name] = rate
            members = [m.spec.name for m in self.members if m.spec.group == group]
            hits = [len(members)]  # the final stop
            for f in r.faults:
                if not f.kind.startswith(("member-", "lone-")):
                    hits.append(len(members))
                elif f.target in members:
                    hits.append(1)
            r.bounds[name] = duplicate_bound(rate=rate, interval=interval,
                                             partitions=c.brokers * c.partitions,
                                             max_in_flight=s.max_in_flight, hits=hits)
            # one replay (a run of consecutive entries) is explained by one fault alone
            r.run_bounds[name] = duplicate_bound(rate=rate, interval=interval,
                                                 partitions=c.brokers * c.partitions,
                                                 max_in_flight=s.max_in_flight,
                                                 hits=[len(members)])

    def _window(self, ids: list[int]) -> str:
        assert self.load is not None
        return fault_window(self.result.faults, self.load.produced_at, ids)


def run_soak(config: SoakConfig) -> SoakResult:
    """Run one soak (see the module docstring); never raises for what it found."""
    config.workdir.mkdir(parents=True, exist_ok=True)
    return _Run(config).run()
