"""Finding a job's leftover processes through /proc (no orphan may survive a job)."""

from __future__ import annotations

from pathlib import Path


def live_processes_with_env(name: str, value: str) -> list[int]:
    """Pids of live (not zombie) processes whose environment has ``name=value``."""
    needle = f"{name}={value}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (
                needle in (proc / "environ").read_bytes().split(b"\0")
                and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids
