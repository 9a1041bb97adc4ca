"""The text files people write for the tool (pools, env files, registries, cases, policies)
are UTF-8; a byte that is not is named with its line, as any other mistake in them is."""

from __future__ import annotations

from pathlib import Path


class NotUtf8(ValueError):
    """The file holds a byte that is not UTF-8; the message says which and the fix."""

    def __init__(self, data: bytes, error: UnicodeDecodeError) -> None:
        self.line = data.count(b"\n", 0, error.start) + 1
        super().__init__(f"byte 0x{data[error.start]:02x} is not UTF-8; save the file as UTF-8")


def read_utf8(path: Path) -> str:
    """The file's text; OSError when it cannot be read, NotUtf8 when it is not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(data, exc) from None
