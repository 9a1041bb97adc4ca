"""External analyzers run as commands, and parsers for their documented output formats.

Import the public API from :mod:`pytest_faultloop.analyzers`.
"""
