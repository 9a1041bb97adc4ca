"""Who writes a session, and in what order sessions were made: one re-analysis at a time, its
results written aside and published whole, `last` the session made last whatever the clock.

Each test reproduces one way the stored scores went silently wrong (issue 44, items 1-3 and 12)
through real pytest runs of the plugin, on the fake-stage project (no jobs)."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.full_disk import fill, release, small_filesystem
from support.sessions import only_session, sessions

from pytest_faultloop.__main__ import main
from pytest_faultloop.store import revisions
from pytest_faultloop.store.revisions import SessionRevisions

copy_replacing = revisions._copy_replacing

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\nSIGTERM:1:5:2\n"}
RESCORE = ("experiments/", "--faultloop-reanalyze", "--faultloop-session")
HOLD = "FAKE_LOG_HOLD"


def _fingerprints(directory: Path) -> dict[str, str]:
    return {
        p.parent.name: json.loads(p.read_bytes())["fingerprint"]
        for p in sorted(directory.glob("*/result.json"))
    }


def _analyzer(pytester: pytest.Pytester, version: str) -> None:
    """Another version of the fake log analyzer (its source is part of the fingerprint)."""
    conftest = pytester.path / "conftest.py"
    head = "def pytest_faultloop_analyze_log(config, experiment, artifacts):\n"
    text = conftest.read_text()
    assert head in text
    marked = re.sub(
        re.escape(head) + r"(?:    # version \w+\n)?", f"{head}    # version {version}\n", text
    )
    conftest.write_text(marked)


def _rescore_in_background(
    pytester: pytest.Pytester, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """A re-analysis in a process of its own (so it can be killed, or run beside another)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *RESCORE, "last", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_rescored(
    session: Path, before: dict[str, str], count: int, proc: subprocess.Popen[str]
) -> None:
    """Until the re-analysis ``proc`` has re-scored ``count`` of the experiments scored
    ``before``, wherever it writes them (the held ones keep it running meanwhile; a loaded
    machine only makes it later)."""
    while _rescored(session, before) < count:
        assert proc.poll() is None, f"the re-analysis ended early: {proc.communicate()[0]}"
        time.sleep(0.05)


def _rescored(session: Path, before: dict[str, str]) -> int:
    aside = sum(1 for _ in session.glob("revisions/.r*.partial/*/result.json"))
    in_place = sum(fp != before[name] for name, fp in _fingerprints(session).items())
    return aside + in_place


def test_a_second_reanalysis_beside_a_running_one_is_refused_and_neither_mixes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    _analyzer(pytester, "b")
    scored = _fingerprints(session)
    first = _rescore_in_background(pytester, env={HOLD: "SIGTERM:1:5:2"})
    _wait_for_rescored(session, scored, 3, first)  # the fourth is held until released
    _analyzer(pytester, "c")

    second = pytester.runpytest_subprocess(*RESCORE, "last", "-p", "no:cacheprovider")
    (pytester.path / "release").touch()

    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(
        [f"ERROR: session {session} is in use by a re-analysis (pid {first.pid} on *"]
    )
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out
    fingerprints = {
        name: set(_fingerprints(session / "revisions" / name).values()) for name in ("r0", "r1")
    }
    assert all(len(versions) == 1 for versions in fingerprints.values()), fingerprints
    assert fingerprints["r0"] != fingerprints["r1"]
    assert set(_fingerprints(session).values()) == fingerprints["r1"]
    index = (session / "revisions" / "revisions.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in index] == ["r0", "r1"]


def test_a_reanalysis_killed_half_way_leaves_the_session_as_it_was_and_its_work_kept(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    before = {p: p.read_bytes() for p in session.glob("*/result.json")}
    _analyzer(pytester, "b")
    scored = _fingerprints(session)
    killed = _rescore_in_background(pytester, env={HOLD: "SIGKILL:1:5:2,SIGTERM:1:5:2"})
    _wait_for_rescored(session, scored, 2, killed)  # the other two are held
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)

    assert {p: p.read_bytes() for p in session.glob("*/result.json")} == before
    continued = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", "last"
    )
    continued.assert_outcomes(passed=20)
    assert len(set(_fingerprints(session).values())) == 1  # nothing re-scored leaked in
    history = (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    assert len({json.loads(h)["fingerprint"] for h in history}) == 1

    again = pytester.runpytest(*RESCORE, "last")

    again.assert_outcomes(passed=20)
    again.stdout.fnmatch_lines(["*an earlier re-analysis of * stopped before it published*"])
    (abandoned,) = (session / "revisions" / "abandoned").iterdir()
    assert len(list(abandoned.glob("*/result.json"))) >= 2  # what the killed one did: kept
    assert len(set(_fingerprints(session).values())) == 1
    assert set(_fingerprints(session).values()) == set(
        _fingerprints(session / "revisions" / "r1").values()
    )


def test_a_session_scored_by_two_versions_says_so_and_compare_pairs_per_version(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-analysis of two experiments (-k) under a new analyzer: the session's newest
    scoring mixes two versions, which the run, its history record and compare all tell."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    _analyzer(pytester, "b")

    rescored = pytester.runpytest(*RESCORE, "last", "-k", "GPU_SLEEP")

    rescored.assert_outcomes(passed=10, deselected=10)
    rescored.stdout.fnmatch_lines(
        [f"faultloop: session {session} holds results scored by 2 analyzer versions: *"]
    )
    report = (session / "experiments_report.md").read_text()
    assert "**Note:** this session holds results scored by 2 analyzer versions" in report
    assert sorted(_fingerprints(session / "revisions" / "r1").values()) == sorted(
        _fingerprints(session).values()
    )
    history = [
        json.loads(line)
        for line in (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    ]
    assert "+" not in history[-1]["fingerprint"]  # the run's own cells: one version
    capsys.readouterr()
    assert main(["compare", f"{session}@r0", str(session)]) == 0
    out = capsys.readouterr().out
    assert f"{session} holds cells scored by 2 analyzer versions" in out
    compared = [line for line in out.splitlines() if line.startswith("compared ")]
    assert len(compared) == 2, out  # one comparison per pair of versions


def test_last_is_the_session_made_last_whatever_the_time_zone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run's clock is 14 hours ahead of UTC, the second's 12 hours behind: by name
    the first session is the newer one."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    for zone in ("Etc/GMT-14", "Etc/GMT+12"):  # POSIX signs: UTC+14, then UTC-12
        with monkeypatch.context() as clock:
            clock.setenv("TZ", zone)
            time.tzset()
            pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
        time.tzset()
    made_last, made_first = sessions(base)  # by name, the second run's stamp is the older
    assert made_first.name > made_last.name

    continued = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", "last", "-k", "SIGKILL"
    )

    continued.assert_outcomes(passed=5, deselected=15)
    assert "kept from an earlier run" in continued.stdout.str()
    records = (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    assert json.loads(records[-1])["session"] == str(made_last)


def test_a_full_disk_when_a_reanalysis_begins_is_one_line_and_changes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    small_filesystem(base, size_mb=72)  # a job needs 64 MB free
    try:
        pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
        session = only_session(base)
        before = {p: p.read_bytes() for p in session.rglob("*") if p.is_file()}
        fill(base)

        result = pytester.runpytest_subprocess(*RESCORE, "last")

        assert result.ret == pytest.ExitCode.USAGE_ERROR
        (line,) = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
        assert f"cannot keep the scoring of session {session} as a revision" in line
        assert "No space left on device" in line and "nothing was changed" in line
        assert "Traceback" not in result.stderr.str() + result.stdout.str()
        after = {p: p.read_bytes() for p in session.rglob("*") if p.is_file()}
        assert {p: after[p] for p in before} == before
        assert not list(session.glob("revisions/.*"))  # no half-written revision left
    finally:
        release(base)


def test_a_publication_cut_short_is_finished_by_the_next_reader(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between two of the copies that make a revision the session's results (a
    window of milliseconds the chaos test rarely hits) is stood in for by a copy that fails."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    store = SessionRevisions(session)
    reanalysis, _ = store.begin_reanalysis()
    for result in session.glob("*/result.json"):
        rescored = json.loads(result.read_bytes()) | {"fingerprint": "rescored"}
        aside = store.staging(reanalysis) / result.parent.name / "result.json"
        aside.parent.mkdir()
        aside.write_text(json.dumps(rescored))
    copies: list[Path] = []

    def killed_after_one(source: Path, target: Path) -> None:
        if copies:
            raise KeyboardInterrupt  # what a kill would leave: the rest never copied
        copies.append(target)
        copy_replacing(source, target)

    monkeypatch.setattr(revisions, "_copy_replacing", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        store.publish(reanalysis)
    monkeypatch.setattr(revisions, "_copy_replacing", copy_replacing)
    assert sorted(set(_fingerprints(session).values()))[-1] == "rescored"  # half copied

    current = SessionRevisions(session).current()

    assert {r.fingerprint for r in current} == {"rescored"}
    assert set(_fingerprints(session).values()) == {"rescored"}
    assert [r.name for r in SessionRevisions(session).all()] == ["r0", "r1"]
    assert not (session / "revisions" / ".publishing").exists()


def test_a_revision_copies_no_link_and_keeps_each_result_private_that_was(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    secret = pytester.path / "secret.json"
    secret.write_text('{"token": "do-not-copy"}')
    secret.chmod(0o600)
    linked, private, *_ = sorted(session.glob("*/result.json"))
    linked.unlink()
    linked.symlink_to(secret)
    private.chmod(0o600)

    pytester.runpytest(*RESCORE, "last")

    kept = [p for p in (session / "revisions").rglob("*") if p.is_file()]
    assert not any(b"do-not-copy" in p.read_bytes() for p in kept)
    assert not any(p.is_symlink() for p in (session / "revisions").rglob("*"))
    for name in ("r0", "r1"):
        copy = session / "revisions" / name / private.parent.name / "result.json"
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600, name
    assert stat.S_IMODE(private.stat().st_mode) == 0o600  # re-scored, still private
    assert linked.is_symlink()  # left as it was: the run said it cannot read it


@pytest.mark.parametrize("how", ["continue", "re-analysis"])
def test_the_workers_of_one_run_share_its_claim(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Under xdist the controller claims the session (alone, for a re-analysis) and its
    workers write through that claim; they are never refused by their own run."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    args = RESCORE if how == "re-analysis" else ("experiments/", "--faultloop-session")
    result = pytester.runpytest(*args, "last", "--faultloop-pool=p", "-n", "2")
    result.assert_outcomes(passed=20)
    assert "is in use by" not in result.stdout.str() + result.stderr.str()
    if how == "re-analysis":
        assert [r.name for r in SessionRevisions(session).all()] == ["r0", "r1"]


def test_last_whose_tsv_was_lost_is_refused_with_the_rebuild_never_passed_over(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    for _ in range(2):
        pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
    newest = max(sessions(base), key=lambda p: int((p / ".sequence").read_text()))
    (newest / "experiments.tsv").unlink()

    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-session", "last")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{newest} has no experiments.tsv*rebuild-tsv {newest}"])
