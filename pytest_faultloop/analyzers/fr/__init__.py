"""The built-in flight-recorder analyzer: dump reading (``dumps``) into small per-rank summaries
(``summary``, memberships shared by ``interning``), parallel loading of a set (``dump_set``),
divergence analysis (``fr_analyzer``), the nvrx table (``nvrx_table``).

Import the public API from :mod:`pytest_faultloop.analyzers`.
"""
