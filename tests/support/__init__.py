"""Test helpers that use real things: loop-mounted filesystems, tree specs, tree diffs.

Modules: `loopfs` (loop-mounted XFS/ext4 scratch filesystems), `treespec` (markers and
`make_tree`), `treecmp` (`compare_trees`), `strategies` (hypothesis `trees()`).
Nothing here imports the engine, so a broken engine never breaks the helpers' own tests.
"""
