"""From stored results to the reports people read and the loop's bookkeeping.

- ``outcome``: the pass rule (:func:`~.outcome.dimension_passes`) shared with the plugin.
- ``results``: loading a session's ``result.json`` files.
- ``markdown``: the seed's ``experiments_report.md`` (row by row, or whole), built on
  ``mdtable``; its aggregate section comes from ``aggregate`` and ``patterns``.
- ``html``: pytest-html pieces (summary matrix, per-experiment extras).
- ``history``: ``history.jsonl``, finding earlier records and the stop condition.
- ``paired``: paired comparison of two runs per dimension, with an exact McNemar p-value.
- ``stats``: Wilson and cluster-robust intervals, exact McNemar, Cohen's kappa, pass^N.
"""
