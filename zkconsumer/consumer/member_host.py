"""`Member`: what the member's procedures need from the machine that runs them.

`member_procs`, `member_zkops` and `member_ownership` are the machine's own modules: the
machine (`zkconsumer.consumer.member_machine.MemberMachine`) calls them from its event
handlers and they act on it.  Typing their argument as the machine class would make them
import the module that imports them -- a circle, even under ``TYPE_CHECKING``.  This
protocol, below all four, names exactly the state and operations the procedures use, so
the dependency points one way: machine -> procedures -> this module.  `MemberMachine`
satisfies it structurally (mypy checks that wherever the machine passes ``self``).

Invariants the procedures rely on: ``state`` changes only through ``_set_state`` (which
validates against `member_state.TRANSITIONS`); commands reach the executor only through
``emit`` (which keeps the machine's bookkeeping of fetchers and owner creates); ``req``
numbers are unique for the machine's life.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from zkconsumer.consumer.member_commands import Command
from zkconsumer.consumer.member_events import ConnState, Key, TimerName
from zkconsumer.consumer.member_state import (
    MemberConfig,
    MemberState,
    Owned,
    Proc,
    RebalanceRun,
)
from zkconsumer.consumer.message import ConsumerStats
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.paths import BrokerInfo

__all__ = ["Member", "OnDone"]

#: called with a procedure's result, or the error that ended it
OnDone = Callable[[Any, ZkConsumerError | None], None]


class Member(Protocol):
    """The machine as its procedures see it (see the module docstring)."""

    config: MemberConfig
    stats: ConsumerStats
    state: MemberState
    link: ConnState
    session_id: int | None
    now: float
    owned: dict[Key, Owned]
    queue: deque[tuple[str, Callable[[], Proc], OnDone]]
    timers: dict[TimerName, float]
    rebalance: RebalanceRun | None
    want_rebalance: bool
    register_needed: bool
    recover_needed: bool
    autocommit_queued: bool
    commit_tokens: dict[int, float | None]
    check_tokens: set[int]
    exists_reqs: dict[int, str]
    doubtful: set[tuple[str, bytes]]
    fetch_brokers: dict[int, BrokerInfo] | None

    def _set_state(self, new: MemberState, reason: str) -> None: ...
    def req(self) -> int: ...
    def emit(self, *commands: Command) -> None: ...
    def set_timer(self, name: TimerName, at: float) -> None: ...
    def cancel_timer(self, name: TimerName) -> None: ...
    def arm_parked_timer(self) -> None: ...
    def enqueue(self, name: str, factory: Callable[[], Proc], on_done: OnDone, *,
                first: bool = False) -> None: ...
    def abort(self, why: str) -> None: ...
    def ensure_watch(self, path: str) -> None: ...
    def rearm_watches(self) -> None: ...
    def request_rebalance(self, why: str) -> None: ...
    def start_done(self, error: ZkConsumerError | None) -> None: ...
    def commit_done(self, token: int, failures: int) -> None: ...
    def check_done(self, token: int, drift: tuple[str, ...],
                   error: ZkConsumerError | None) -> None: ...
