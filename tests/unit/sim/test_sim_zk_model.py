"""The in-memory ZooKeeper against a plain reference model, driven by hypothesis.

Random interleavings of creates (with their missing parents), versioned sets and deletes,
multis and session ends from two sessions; after every step the server's answer and its
whole tree (data, version, ephemeral owner, children) must equal the model's.  Hypothesis
shrinks any disagreement to the shortest sequence that shows it.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from zkconsumer.consumer.member_commands import Create, Delete, Multi, SetData
from zkconsumer.consumer.member_events import ZkError
from zkconsumer.sim.loop import Loop
from zkconsumer.sim.zk import ZooKeeper

PATHS = ["/a", "/a/b", "/a/b/c", "/a/d", "/e"]
path_st = st.sampled_from(PATHS)
data_st = st.sampled_from([b"", b"x", b"yy"])
version_st = st.sampled_from([-1, 0, 1, 2])

#: path -> [data, version, owner session (0: persistent)]
Tree = dict[str, list]  # type: ignore[type-arg]


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _children(tree: Tree, path: str) -> list[str]:
    return [p for p in tree if p != "/" and _parent(p) == path]


def model_create(tree: Tree, path: str, data: bytes, owner: int) -> ZkError | None:
    if path in tree:
        return ZkError.NODE_EXISTS
    chain = []
    p = _parent(path)
    while p not in tree:
        chain.append(p)
        p = _parent(p)
    if tree[p][2]:
        return ZkError.OTHER  # no children under an ephemeral
    for q in reversed(chain):
        tree[q] = [None, 0, 0]
    tree[path] = [data, 0, owner]
    return None


def model_set(tree: Tree, path: str, data: bytes, version: int) -> ZkError | None:
    if path not in tree:
        return ZkError.NO_NODE
    if version not in (-1, tree[path][1]):
        return ZkError.BAD_VERSION
    tree[path][0] = data
    tree[path][1] += 1
    return None


def model_delete(tree: Tree, path: str, version: int) -> ZkError | None:
    if path not in tree:
        return ZkError.NO_NODE
    if version not in (-1, tree[path][1]):
        return ZkError.BAD_VERSION
    if _children(tree, path):
        return ZkError.NOT_EMPTY
    del tree[path]
    return None


class ZooKeeperMatchesTheModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.zk = ZooKeeper(Loop(0))
        self.sessions = [self.zk.open_session(6.0, None) for _ in range(2)]
        self.tree: Tree = {"/": [None, 0, 0]}

    def _sid(self, i: int) -> int:
        return self.sessions[i].id

    @rule(i=st.integers(0, 1), path=path_st, data=data_st, ephemeral=st.booleans())
    def create(self, i: int, path: str, data: bytes, ephemeral: bool) -> None:
        session = self.sessions[i]
        reply = self.zk.execute(session.id, Create(1, path, data, ephemeral))
        if not session.alive:
            assert reply.error is ZkError.SESSION_EXPIRED
            return
        assert reply.error == model_create(self.tree, path, data,
                                           session.id if ephemeral else 0)

    @rule(i=st.integers(0, 1), path=path_st, data=data_st, version=version_st)
    def set_data(self, i: int, path: str, data: bytes, version: int) -> None:
        session = self.sessions[i]
        reply = self.zk.execute(session.id, SetData(1, path, data, version))
        if session.alive:
            assert reply.error == model_set(self.tree, path, data, version)

    @rule(i=st.integers(0, 1), path=path_st, version=version_st)
    def delete(self, i: int, path: str, version: int) -> None:
        session = self.sessions[i]
        reply = self.zk.execute(session.id, Delete(1, path, version))
        if session.alive:
            assert reply.error == model_delete(self.tree, path, version)

    @rule(i=st.integers(0, 1), a=path_st, b=path_st, data=data_st, version=version_st)
    def multi(self, i: int, a: str, b: str, data: bytes, version: int) -> None:
        session = self.sessions[i]
        reply = self.zk.execute(session.id, Multi(1, (Create(0, a, data),
                                                      SetData(0, b, data, version))))
        if not session.alive:
            return
        trial = {k: list(v) for k, v in self.tree.items()}
        expected = model_create(trial, a, data, 0) or model_set(trial, b, data, version)
        assert reply.error == expected
        if expected is None:
            self.tree = trial

    @rule(i=st.integers(0, 1))
    def end_session(self, i: int) -> None:
        session = self.sessions[i]
        if not session.alive:
            return
        self.zk.close_session(session)
        for path in [p for p, v in self.tree.items() if v[2] == session.id]:
            del self.tree[path]
        self.sessions[i] = self.zk.open_session(6.0, None)

    @invariant()
    def same_tree(self) -> None:
        got = {p: [n.data, n.version, n.owner] for p, n in self.zk.nodes.items()}
        assert got == self.tree
        for path, node in self.zk.nodes.items():
            assert sorted(node.children) == sorted(p.rsplit("/", 1)[1]
                                                   for p in _children(self.tree, path))
        for session in self.sessions:
            assert sorted(session.ephemerals) == sorted(
                p for p, v in self.tree.items() if v[2] == session.id)


ZooKeeperMatchesTheModel.TestCase.settings = settings(max_examples=150,
                                                      stateful_step_count=30, deadline=None)
TestZooKeeperMatchesTheModel = ZooKeeperMatchesTheModel.TestCase
