"""Projection of a thread's context size from its session events alone (issue 6, seeds 003 and 000): pure functions.

`estimator` counts surface text, `profiles` turns tokens into a budget, `forecast` predicts the next compaction, and
`fold` ties them into the per-thread fold whose readings the engine takes as `worker_estimator` snapshots.
"""
