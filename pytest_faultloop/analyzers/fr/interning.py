"""One shared record per process-group membership, however many ranks' dumps repeat it.

Every rank's ``pg_config`` lists the groups it belongs to, the default group with every rank
of the job among them: kept per rank, memberships grow with the square of the job's size.
An :class:`Interner` parses each distinct membership once and hands every rank that reports
it the same :class:`Membership` and :class:`GroupConfig` objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pytest_faultloop.analyzers.fr.summary import NO_CONFIG, GroupConfig, Membership, RankDump

_DIGITS = re.compile(r"\d+")


class Interner:
    """The distinct memberships and configs seen so far; each is kept once."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str, object], Membership] = {}
        """Raw (name, desc, ranks as written) -> its record: parsed once per distinct text."""
        self._members: dict[Membership, Membership] = {}
        self._configs: dict[tuple[int, ...], GroupConfig] = {}
        """Keyed by the ids of its (interned, hence kept alive) memberships."""

    @property
    def memberships(self) -> int:
        """How many distinct memberships are held."""
        return len(self._members)

    def config(self, raw: object) -> GroupConfig:
        """A dump's ``pg_config`` as the shared record of its groups."""
        if not isinstance(raw, dict):
            return NO_CONFIG
        groups: dict[str, Membership] = {}
        for name, value in raw.items():
            if not name or not isinstance(value, dict):
                continue  # gloo's collapsed ``{'': {...}}`` entry
            ranks = value.get("ranks", [])
            desc = str(value.get("desc", ""))
            key = (str(name), desc, ranks if isinstance(ranks, str) else tuple(ranks))
            member = self._parsed.get(key)
            if member is None:
                listed = _DIGITS.findall(ranks) if isinstance(ranks, str) else ranks
                member = self._parsed[key] = self._member(
                    Membership(str(name), desc, tuple(int(r) for r in listed))
                )
            groups[str(name)] = member
        return self._config(tuple(groups.values()))

    def adopt(self, dumps: Iterable[RankDump]) -> None:
        """Point dumps decoded elsewhere (another process) at this interner's records.

        Their records are shared within the batch they came in (pickle keeps one copy per
        object), so each distinct one is looked up once per batch."""
        seen: dict[int, tuple[GroupConfig, GroupConfig]] = {}
        for dump in dumps:
            # the batch's own record is kept with its shared one: its id must not be reused
            _, shared = seen.get(id(dump.config)) or seen.setdefault(
                id(dump.config),
                (dump.config, self._config(tuple(self._member(m) for m in dump.config.groups))),
            )
            dump.config = shared

    def _member(self, member: Membership) -> Membership:
        return self._members.setdefault(member, member)

    def _config(self, groups: tuple[Membership, ...]) -> GroupConfig:
        if not groups:
            return NO_CONFIG
        key = tuple(id(m) for m in groups)
        shared = self._configs.get(key)
        if shared is None:
            shared = self._configs[key] = GroupConfig(groups, frozenset(m.name for m in groups))
        return shared
