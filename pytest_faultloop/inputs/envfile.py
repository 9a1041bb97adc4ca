"""The seed's ``user.env``: ``KEY=VALUE`` lines, ``#`` comments, optional ``export``, quotes."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.store.text_files import NotUtf8, read_utf8

_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class EnvValue:
    value: str
    line: int


def read_env_file(path: Path) -> dict[str, EnvValue]:
    """Parse without executing anything; ``${VAR}``/``$HOME``/``~`` are expanded from earlier
    keys and the environment, as a shell sourcing the file would."""
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise ConfigError(
            f"env file {path}: cannot read it ({exc.strerror}); fix the path given by "
            "--faultloop-env-file or create it from scripts/user.env.example"
        ) from None
    except NotUtf8 as exc:
        raise ConfigError(f"{path}:{exc.line}: {exc}") from None
    values: dict[str, EnvValue] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            raise ConfigError(f"{path}:{lineno}: expected KEY=VALUE, got {line!r}")
        key, rest = match.groups()
        try:
            words = shlex.split(rest, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{path}:{lineno}: {key}: {exc} (check the quotes)") from None
        value = " ".join(words)
        quoted_single = rest.lstrip().startswith("'")
        if not quoted_single:
            value = _expand(value, values)
        values[key] = EnvValue(value, lineno)
    return values


def _expand(value: str, earlier: dict[str, EnvValue]) -> str:
    def lookup(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in earlier:
            return earlier[name].value
        return os.environ.get(name, "")

    value = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", lookup, value)
    return os.path.expanduser(value) if value.startswith("~") else value
