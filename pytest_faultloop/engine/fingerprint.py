"""What identifies the attribution stages that ran: a label per stage for the report header, and
the parts the analyzer fingerprint hashes.

The **fingerprint** (16 hex digits, :func:`fingerprint`) names
the attribution modules a result came from; history, ``--faultloop-compare`` and the stop
condition tell runs apart by it. It hashes the restart policy's hash and one part per stage —
log analyzer, FR analyzer, judge —, each apart, for whichever implementation answered it:

- a hook implementation (``pytest_faultloop_analyze_log`` ... in a ``conftest.py`` or a
  plugin): its label (``conftest.py:pytest_faultloop_analyze_log``, or the plugin's name) and
  the hash of its function's source (its module file when the source cannot be read); helpers
  it calls elsewhere are not part of it;
- the built-in log analyzer (``builtin``, ``llm`` with its model): the log analyzer's own
  sources (``analyzers/log/``, the shared modules it uses, ``analyzer_policy.toml``);
- the built-in FR analyzer: ``analyzers/fr/`` and the shared module it uses;
- a ``cmd:`` analyzer: its command, the output parsers (``analyzers/external/``) and the
  contents of every file the command names (each argument that is an existing file, relative
  to the current directory; ``--opt=FILE`` too);
- the built-in judge: its kind and model (its rules are not part of it).

Where a hook implementation returns None and the built-in stage answers, the built-in part
counts. Fingerprints stored before this composition (a plain string) load and compare as
before; the first run under it starts a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from pytest_faultloop.analyzers.kinds import AnalyzerKind

STAGE_HOOKS = {
    "judge": "pytest_faultloop_judge",
    "log_analyzer": "pytest_faultloop_analyze_log",
    "fr_analyzer": "pytest_faultloop_analyze_fr",
}
"""Each fingerprinted stage and its hook, in the header's order."""


def fingerprint(parts: dict[str, str]) -> str:
    """A short stable hash of the stages' parts (the restart policy's and one per stage)."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


CODE = (".py", ".toml")
"""What a directory in a fingerprint's sources holds that decides its answers."""


def code_hash(paths: Iterable[Path]) -> str:
    """A short hash of the files' names and contents (a directory: its code and data, the
    ``*.py`` and ``*.toml`` files: a catalogue entry is as much the analyzer as its code)."""
    digest = hashlib.sha256()
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.suffix in CODE) if path.is_dir() else [path]
        for file in files:
            digest.update(file.name.encode())
            digest.update(file.read_bytes() if file.is_file() else b"")
    return digest.hexdigest()[:16]


def analyzer_part(kind: AnalyzerKind) -> str:
    """A built-in analyzer's setting and the hash of its sources (for ``cmd:``: its output
    parsers and the files its command names)."""
    return f"{kind.spec} {code_hash(kind.sources())}"
