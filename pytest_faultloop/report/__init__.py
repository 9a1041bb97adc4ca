"""From stored results to the reports people read and the loop's bookkeeping.

- ``results``: loading a session's ``result.json`` files (and saying which cannot be read).
- ``markdown``: the seed's ``experiments_report.md`` (row by row, or whole), built on
  ``mdtable``; its aggregate section comes from ``aggregate``, ``patterns``, ``trials``,
  ``robustness`` and ``costs``.
- ``html``, ``html_plugin``, ``svg_chart``: pytest-html pieces (summary matrix and its chart,
  per-experiment extras) and the hooks that add them.
- ``history``: ``history.jsonl``, finding earlier records and the stop condition.
- ``paired``: paired comparison of two runs per dimension, with an exact McNemar p-value.
- ``agreement``: how often the judges agree.
- ``stats``: Wilson and cluster-robust intervals, exact McNemar, Cohen's kappa, pass^N.
- ``summary``: the end of a run (report re-rendered, history, the terminal summary).
"""
