"""Errors that stop a run with a one-line message (no traceback)."""


class FaultloopError(Exception):
    """Base class: the message names the file, line or value at fault and the fix."""


class ConfigError(FaultloopError):
    """A setting, registry or env file is unusable."""


class PoolError(FaultloopError):
    """A pool file or POOL entry is invalid."""


class SessionUnwritable(FaultloopError):
    """The session directory cannot be written: nothing more can be recorded, the run stops."""
