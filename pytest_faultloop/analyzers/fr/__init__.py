"""The built-in flight-recorder analyzer: dump loading, divergence analysis, the nvrx table.

Import the public API from :mod:`pytest_faultloop.analyzers`.
"""
