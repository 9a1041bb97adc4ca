"""The schema version a stored record carries (``result.json``, a ``history.jsonl`` line).

It is written on save; a record without one was written before it existed (version 1). A record
of a newer version than this code reads is refused by name, never misread.
"""

from __future__ import annotations

from pytest_faultloop.models.errors import FaultloopError


class NewerSchema(FaultloopError):
    """A stored record written by a newer pytest-faultloop than this one reads."""

    def __init__(self, version: int, known: int) -> None:
        super().__init__(
            f"schema_version {version} is newer than this pytest-faultloop reads ({known}): "
            "read it with the pytest-faultloop that wrote it, or a newer one"
        )


def refuse_newer(data: object, known: int) -> object:
    """``data`` as given (a model's before-validator), unless it names a ``schema_version``
    above ``known``: NewerSchema, which pydantic lets through unwrapped."""
    if isinstance(data, dict):
        version = data.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > known:
            raise NewerSchema(version, known)
    return data
