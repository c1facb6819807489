"""The one directory lifecycle (:mod:`rcp_core.engine.tree`): post-order finish exactly
once, incomplete subtrees folding upwards, counts announced late, many threads at once."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from rcp_core.engine.tree import UNCOUNTED, Lifecycle, Node, joined
from rcp_core.run.summary import Tally


@dataclass(slots=True, eq=False)
class _Dir(Node["_Dir"]):
    name: str = ""


class _Finished:
    """Records each finish, with the node's view of its children at that moment."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.order: list[str] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, tally: Tally, node: _Dir) -> None:
        with self.lock:
            self.order.append(node.rel)
        if node.rel in self.fail:
            node.incomplete = True


def _child(tree: Lifecycle[_Dir], parent: _Dir, name: str) -> _Dir:
    tree.hold(parent)
    return _Dir(parent=parent, rel=parent.child_rel(name), name=name)


def test_joined_names_below_the_root() -> None:
    assert joined("", "a") == "a"
    assert joined("a/b", "c") == "a/b/c"


def test_a_directory_finishes_once_after_its_children() -> None:
    finished = _Finished()
    tree = Lifecycle(finished)
    tally = Tally()
    root = _Dir(parent=None, rel="")
    a = _child(tree, root, "a")
    b = _child(tree, a, "b")
    tree.hold(a)  # a batch of a's files
    tree.release(tally, root)  # the root's own scan is done
    tree.release(tally, a)  # a's scan is done
    assert finished.order == []
    tree.release(tally, b)  # b finishes; a still has its batch
    assert finished.order == ["a/b"]
    tree.release(tally, a)  # the batch: a, then the root
    assert finished.order == ["a/b", "a", ""]
    assert root.pending == a.pending == b.pending == 0


def test_an_incomplete_subtree_marks_every_ancestor_but_not_its_siblings() -> None:
    finished = _Finished(fail=frozenset({"a/b"}))
    tree = Lifecycle(finished)
    tally = Tally()
    root = _Dir(parent=None, rel="")
    a = _child(tree, root, "a")
    b = _child(tree, a, "b")
    c = _child(tree, root, "c")
    for node in (root, a, c):
        tree.release(tally, node)
    assert not c.incomplete  # finished before the hole was found, and a sibling
    assert finished.order == ["c"]
    tree.release(tally, b)
    assert (b.incomplete, a.incomplete, root.incomplete) == (True, True, True)
    assert finished.order == ["c", "a/b", "a", ""]


def test_a_count_announced_after_its_entries_finishes_at_the_last_of_both() -> None:
    finished = _Finished()
    tree = Lifecycle(finished)
    tally = Tally()
    node = _Dir(parent=None, rel="", pending=UNCOUNTED)
    child = _child(tree, node, "sub")
    tree.release(tally, node, 2)  # two entries arrive before the count
    tree.release(tally, child)  # the child directory is done
    assert finished.order == ["sub"]
    tree.release(tally, node, UNCOUNTED - 3)  # dir_end: three entries in all
    assert finished.order == ["sub"]
    tree.release(tally, node)  # the third entry
    assert finished.order == ["sub", ""]


def test_many_threads_finish_every_directory_once_and_post_order() -> None:
    finished = _Finished()
    tree = Lifecycle(finished)
    tally = Tally()
    root = _Dir(parent=None, rel="")
    nodes = [root]
    for n in range(300):
        parent = random.Random(n).choice(nodes)
        nodes.append(_child(tree, parent, f"d{n}"))
    refs: list[_Dir] = []
    for node in nodes:
        extra = random.Random(node.rel).randrange(4)
        tree.hold(node, extra)
        refs += [node] * (extra + 1)
    random.Random(7).shuffle(refs)
    chunks = [refs[i::4] for i in range(4)]
    threads = [
        threading.Thread(target=lambda c=c: [tree.release(tally, x) for x in c])
        for c in chunks
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(finished.order) == sorted(node.rel for node in nodes)
    at = {rel: i for i, rel in enumerate(finished.order)}
    for node in nodes[1:]:
        assert node.parent is not None
        assert at[node.rel] < at[node.parent.rel]


def test_releasing_several_references_finishes_and_releases_the_parent_once() -> None:
    finished = _Finished()
    tree = Lifecycle(finished)
    tally = Tally()
    root = _Dir(parent=None, rel="")
    a = _child(tree, root, "a")
    tree.hold(root)  # a batch of the root's files
    tree.release(tally, root)  # the root's scan
    tree.hold(a, 2)
    tree.release(tally, a, 3)
    assert finished.order == ["a"]
    assert root.pending == 1  # its batch still holds it: a released it once
    tree.release(tally, root)
    assert finished.order == ["a", ""]
