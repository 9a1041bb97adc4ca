"""The log analyzers: built-in rules and the LLM analyzer, with their streaming log reading.

Import the public API from :mod:`pytest_faultloop.analyzers`.
"""
