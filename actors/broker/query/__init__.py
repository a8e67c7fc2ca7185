"""The broker's read-only admin queries (consume queue, topics and subscription of a group,
correction offsets, system topics): answers.py is the pure core, feature.py the shell."""
