"""The settings' rows registered with pytest: a ``--faultloop-*`` option (where the row has
one) in its help group, and a ``faultloop_<name>`` ini key for every setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_faultloop.inputs.pool import Invocation
from pytest_faultloop.inputs.settings import GROUPS, SETTINGS

IniType = Literal["linelist", "bool", "string", "int", "float"]
_INI_TYPE: dict[str, IniType] = {
    "flag": "bool",
    "list": "linelist",
    "int": "int",
    "float": "float",
    "string": "string",
}


def add_options(parser: pytest.Parser) -> None:
    groups = {name: parser.getgroup(f"faultloop-{name}", title) for name, title in GROUPS.items()}
    for s in SETTINGS:
        if s.field != "env_file":  # the env file is chosen before the ini is read
            parser.addini(s.dest, s.help, type=_INI_TYPE[s.kind], default=None)
        if s.option is None:
            continue
        group = groups[s.group]
        env_note = f" [env {s.env}]" if s.env else ""
        if s.kind == "flag":
            group.addoption(
                s.option, action="store_true", default=None, dest=s.dest, help=s.help + env_note
            )
        else:
            group.addoption(
                s.option,
                action="append" if s.kind == "list" else "store",
                default=None,
                dest=s.dest,
                metavar=s.metavar,
                help=s.help + env_note,
            )


class ConfigValues:
    """pytest's config as the settings read it (``settings.OptionValues``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @property
    def rootpath(self) -> Path:
        return self.config.rootpath

    def option(self, dest: str) -> Any:
        return self.config.getoption(dest)

    def ini(self, dest: str) -> Any:
        try:
            return self.config.getini(dest)
        except pytest.UsageError as exc:  # a value of the wrong type for the key
            raise ValueError(str(exc)) from None


def invocation(config: pytest.Config) -> Invocation:
    """How this pytest run was started, as the pools read it (``--lf``'s failures included)."""
    last_failed = None
    if config.getoption("lf", False) and config.cache is not None:
        last_failed = tuple(str(nodeid) for nodeid in config.cache.get("cache/lastfailed", {}))
    return Invocation(
        Path(config.invocation_params.dir), config.rootpath, tuple(config.args), last_failed
    )
