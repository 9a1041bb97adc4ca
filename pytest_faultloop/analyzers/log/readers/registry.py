"""The readers, and the catalogue handlers each owns: a catalogue entry's ``handler = "x"`` is
read by the ``on_x`` method of the one reader that declares ``x`` in its ``HANDLERS``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol

from pytest_faultloop.analyzers.log.readers.context import Handler
from pytest_faultloop.analyzers.log.readers.dumps import StackDumpReader
from pytest_faultloop.analyzers.log.readers.elastic import ElasticReader
from pytest_faultloop.analyzers.log.readers.exceptions import ExceptionReader
from pytest_faultloop.analyzers.log.readers.horovod import HorovodReader
from pytest_faultloop.analyzers.log.readers.initialization import InitializationReader
from pytest_faultloop.analyzers.log.readers.mpi import MpiReader
from pytest_faultloop.analyzers.log.readers.nccl import NcclReader
from pytest_faultloop.analyzers.log.readers.ray import RayReader
from pytest_faultloop.analyzers.log.readers.schedulers import SchedulerReader
from pytest_faultloop.analyzers.log.readers.stragglers import StragglerReader
from pytest_faultloop.analyzers.log.signatures import CATALOGUE, CatalogueError, Signature


class Reader(Protocol):
    HANDLERS: ClassVar[tuple[str, ...]]


READERS: tuple[type[Reader], ...] = (
    ElasticReader,
    MpiReader,
    HorovodReader,
    NcclReader,
    InitializationReader,
    StackDumpReader,
    ExceptionReader,
    RayReader,
    SchedulerReader,
    StragglerReader,
)


def owners() -> dict[str, type[Reader]]:
    """Each handler name, with the reader that declares it (no name declared twice)."""
    owner: dict[str, type[Reader]] = {}
    for reader in READERS:
        for name in reader.HANDLERS:
            if name in owner:
                raise CatalogueError(
                    f"handler {name!r} is declared by {owner[name].__name__} and "
                    f"{reader.__name__}: one reader owns it"
                )
            owner[name] = reader
    return owner


def check_handlers(entries: Iterable[Signature]) -> None:
    """Every entry's handler is a reader's (one error naming the first entry that names none)."""
    known = owners()
    for entry in entries:
        if entry.handler is not None and entry.handler not in known:
            raise CatalogueError(
                f"{CATALOGUE}: signature {entry.id!r}: handler {entry.handler!r} is no "
                f"reader's; the readers' handlers are {', '.join(sorted(known))}"
            )


def handler_table(readers: Iterable[Reader]) -> dict[str, Handler]:
    """The readers' handlers by name, bound to the readers (built once per scan)."""
    table: dict[str, Handler] = {}
    for reader in readers:
        for name in reader.HANDLERS:
            table[name] = getattr(reader, f"on_{name}")
    return table
