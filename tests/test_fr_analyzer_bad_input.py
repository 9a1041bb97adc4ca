"""Bad dumps give a result naming the file and the reason, never an exception; nothing runs."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from pytest_faultloop.analyzers import analyze_fr

FR = Path(__file__).parent / "fixtures" / "fr"


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _copy(scenario: str, to: Path) -> Path:
    to.mkdir(exist_ok=True)
    for source in (FR / scenario).iterdir():
        (to / source.name).write_bytes(source.read_bytes())
    return to


def test_missing_directory(tmp_path: Path) -> None:
    analysis = analyze_fr(tmp_path / "absent")
    assert analysis.no_dumps
    assert analysis.unreadable == [f"{tmp_path / 'absent'}: no such directory or dump prefix"]


def test_empty_directory_is_no_dumps(tmp_path: Path) -> None:
    analysis = analyze_fr(tmp_path)
    assert analysis.no_dumps and analysis.suspects == []


def test_object_in_a_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    dumps = _copy("gloo_tp_hang", tmp_path / "dumps")
    marker = tmp_path / "pwned"
    (dumps / "_dump_2").write_bytes(
        pickle.dumps({"version": "2.10", "entries": [_Exploit(marker)]})
    )
    analysis = analyze_fr(dumps)
    assert not marker.exists()
    assert analysis.dumps_read == 3
    assert analysis.unreadable == [
        f"{dumps / '_dump_2'}: refused: the pickle references posix.system; only plain containers and scalars are allowed"
    ]


def test_truncated_and_corrupt_dumps(tmp_path: Path) -> None:
    dumps = _copy("gloo_tp_hang", tmp_path / "dumps")
    whole = (dumps / "_dump_0").read_bytes()
    (dumps / "_dump_0").write_bytes(whole[: len(whole) // 2])
    (dumps / "_dump_3").write_bytes(b"\x80\x02garbage")
    (dumps / "_dump_4").write_bytes(b"{not json")
    analysis = analyze_fr(dumps)
    reasons = {
        Path(item.split(": ", 1)[0]).name: item.split(": ", 1)[1] for item in analysis.unreadable
    }
    assert reasons["_dump_0"].startswith("truncated or corrupt pickle")
    assert "pickle" in reasons["_dump_3"]
    assert reasons["_dump_4"].startswith("corrupt JSON dump")
    assert analysis.dumps_read == 2


def test_not_a_dump_and_wrong_version(tmp_path: Path) -> None:
    (tmp_path / "_dump_0").write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    (tmp_path / "_dump_1").write_bytes(pickle.dumps({"version": "1.0", "entries": []}, protocol=2))
    (tmp_path / "_dump_").write_bytes(b"")
    analysis = analyze_fr(tmp_path)
    assert analysis.no_dumps
    assert sorted(item.split(": ", 1)[1] for item in analysis.unreadable) == [
        "no rank number at the end of the file name",
        "not a flight-recorder dump (no 'entries' list)",
        "unsupported dump version '1.0' (2.x expected)",
    ]


def test_duplicate_rank_files_keep_the_first(tmp_path: Path) -> None:
    dumps = _copy("gloo_tp_hang", tmp_path / "dumps")
    (dumps / "_dump_01").write_bytes((dumps / "_dump_1").read_bytes())
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [1]
    assert analysis.unreadable == [
        f"{dumps / '_dump_1'}: duplicate dump for rank 1 (kept _dump_01)"
    ]


def test_malformed_entries_are_skipped_and_reported(tmp_path: Path) -> None:
    dumps = _copy("gloo_healthy", tmp_path / "dumps")
    dump = pickle.loads((dumps / "_dump_0").read_bytes())
    dump["entries"].append({"record_id": 99})
    (dumps / "_dump_0").write_bytes(pickle.dumps(dump, protocol=2))
    analysis = analyze_fr(dumps)
    assert analysis.dumps_read == 4 and analysis.suspects == []
    assert analysis.unreadable == [
        f"{dumps / '_dump_0'}: 1 malformed entries skipped (first: entry 7)"
    ]
