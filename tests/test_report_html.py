"""pytest-html pieces: the coloured summary matrix and the per-experiment extras, escaped."""

import html
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.report_samples import make_result
from support.verdicts import ALL_FALSE, labels

from pytest_faultloop.models import Decision, ExperimentResult, FrAnalysis
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.html import (
    COLOURS,
    attribution_html,
    experiment_link,
    fr_html,
    item_extras,
    log_tail_html,
    notes_html,
    summary_matrix,
    verdict_table,
)
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import PassRule

FROZEN = Path(__file__).resolve().parent / "fixtures" / "frozen" / "smoke"


def parse(html: str) -> ET.Element:
    """Every piece is well-formed markup; parsing also proves nothing raw leaked through."""
    return ET.fromstring(f"<root>{html}</root>")


def colour_of(cell: ET.Element) -> str:
    style = cell.get("style", "")
    return next(name for name, hex_ in COLOURS.items() if hex_ in style)


def test_summary_matrix_colours_by_pass_share() -> None:
    results = [
        make_result(FaultType.GPU_SLEEP, 1),
        make_result(
            FaultType.GPU_SLEEP, 0, scores=labels(rank_primary="false", fault_described="partial")
        ),
        make_result(
            FaultType.GPU_ERROR,
            1,
            scores=ALL_FALSE,
        ),
        make_result(FaultType.SEGFAULT, 1, broken="judge_failed", reason="HTTP 500"),
    ]
    table = parse(summary_matrix(results)).find("table")
    assert table is not None
    rows = table.findall("tr")
    assert [c.text for c in rows[0]] == [
        "FAULT_TYPE", "scored", "restart_correct", "rank_primary", "rank_any", "fault_described",
        "fr_rank_correct",
    ]  # fmt: skip
    cells = {row[0].text: row[1:] for row in rows[1:]}
    sleep = cells["GPU_SLEEP"]
    assert [c.text for c in sleep] == [
        "2/2",
        "2/2 (100%, 34–100)",
        "1/2 (50%, 9–91)",
        "2/2 (100%, 34–100)",
        "1/2 (50%, 9–91)",
        "2/2 (100%, 34–100)",
    ]
    assert [colour_of(c) for c in sleep[1:]] == ["pass", "partial", "pass", "partial", "pass"]
    assert {colour_of(c) for c in cells["GPU_ERROR"][1:]} == {"fail"}
    assert {colour_of(c) for c in cells["SEGFAULT"][1:]} == {"error"}
    assert "judge errors 1" in (table.findtext("caption") or "")


def test_verdict_table_colours_each_value() -> None:
    result = make_result(
        FaultType.GPU_SLEEP,
        0,
        scores=labels(
            restart_correct="N/A", rank_primary="partial", rank_any="false", fr_rank_correct="node"
        ),
    )
    cells = parse(verdict_table(result)).findall(".//td")
    assert [c.text for c in cells] == ["N/A", "partial", "false", "true", "node"]
    assert [colour_of(c) for c in cells] == ["error", "partial", "fail", "pass", "fail"]
    relaxed = parse(verdict_table(result, PassRule(fr_scope="node"))).findall(".//td")
    assert colour_of(relaxed[4]) == "pass"


def test_verdict_table_of_a_broken_experiment() -> None:
    result = make_result(FaultType.SIGKILL, 1, broken="run_invalid", reason="no <marker>")
    (cell,) = parse(verdict_table(result)).findall(".//td")
    assert cell.get("colspan") == "5"
    assert cell.text == "run_invalid: no <marker>"
    assert colour_of(cell) == "error"


def test_notes_and_attribution_are_escaped() -> None:
    result = make_result(FaultType.GPU_SLEEP, 1, notes="<script>alert('x')</script> & more")
    html = notes_html(result) + attribution_html(result)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in html
    root = parse(html)
    assert root.findtext("p") == "<script>alert('x')</script> & more"
    pre = root.findtext("pre") or ""
    assert pre.splitlines()[0] == "RESTART IMMEDIATE"
    assert "Primary issues: [1]" in pre


def test_fr_piece_shows_the_table_groups_or_no_dumps() -> None:
    result = make_result(FaultType.GPU_SLEEP, 1)
    rows = parse(fr_html(result)).findall(".//table/tr")
    assert [c.text for c in rows[1]] == ["0", "default_pg", "allreduce", "8", "Float", "1"]
    assert result.fr_analysis is not None
    with_table = result.model_copy(
        update={
            "fr_analysis": result.fr_analysis.model_copy(
                update={"table": "PGID | Missing Ranks\n0 | <1>"}
            )
        }
    )
    assert "0 | &lt;1&gt;" in fr_html(with_table)
    no_dumps = result.model_copy(
        update={"fr_analysis": FrAnalysis(analyzer="nvrx_fr", unreadable=["a: <bad>"])}
    )
    html = fr_html(no_dumps)
    assert "No FR dumps were read." in html and "a: &lt;bad&gt;" in html


def _with_log(result: ExperimentResult, tmp_path: Path, text: str) -> ExperimentResult:
    assert result.artifacts is not None
    log = tmp_path / "1850.0.1.main_workload.log"
    log.write_text(text)
    artifacts = result.artifacts.model_copy(update={"log": log, "experiment_dir": tmp_path / "exp"})
    return result.model_copy(update={"artifacts": artifacts})


def test_log_tail_is_the_last_lines_escaped(tmp_path: Path) -> None:
    lines = [f"[rank{i % 8}] iteration {i} <ok>" for i in range(100)]
    result = _with_log(make_result(FaultType.GPU_SLEEP, 1), tmp_path, "\n".join(lines) + "\n")
    root = parse(log_tail_html(result, lines=3))
    assert (root.findtext("pre") or "").splitlines() == lines[-3:]
    assert "&lt;ok&gt;" in log_tail_html(result, lines=3)


def test_missing_log_is_said_not_raised(tmp_path: Path) -> None:
    result = _with_log(make_result(FaultType.GPU_SLEEP, 1), tmp_path, "")
    assert result.artifacts is not None and result.artifacts.log is not None
    result.artifacts.log.unlink()
    assert "Log unreadable" in log_tail_html(result)


def test_experiment_link_absolute_or_relative(tmp_path: Path) -> None:
    result = _with_log(make_result(FaultType.GPU_SLEEP, 1), tmp_path, "x\n")
    absolute = parse(experiment_link(result)).find(".//a")
    assert absolute is not None and absolute.get("href") == (tmp_path / "exp").as_uri()
    relative = parse(experiment_link(result, report_dir=tmp_path / "html")).find(".//a")
    assert relative is not None and relative.get("href") == "../exp"


def test_item_extras_holds_every_piece(tmp_path: Path) -> None:
    result = _with_log(make_result(FaultType.GPU_SLEEP, 1), tmp_path, "last line\n")
    root = parse(item_extras(result, log_lines=5))
    classes = {e.get("class") for e in root.iter()}
    assert {"faultloop-extras", "faultloop-verdict", "faultloop-notes", "faultloop-attribution",
            "faultloop-fr", "faultloop-log", "faultloop-link"} <= classes  # fmt: skip


def test_summary_matrix_draws_rates_with_interval_whiskers_as_inline_svg() -> None:
    results = [
        make_result(FaultType.GPU_SLEEP, 1, 2),
        make_result(FaultType.GPU_SLEEP, 2, 2, scores=labels(rank_primary="false")),
    ]
    html = summary_matrix(results)
    svg = html[html.index("<svg") :]
    assert svg.count("<rect") >= 5 and "<title>GPU_SLEEP rank_primary: 1/2 (50%, 9–91)" in svg
    assert svg.count("<line") >= 3 * 5  # each bar's whisker and its two caps


def test_the_charts_legend_fits_its_width_with_few_fault_types() -> None:
    """Two fault types made the chart 202 px wide and cut the legend after its second entry."""
    results = [make_result(FaultType.GPU_SLEEP, 1, 2), make_result(FaultType.SIGKILL, 1, 2)]
    html = summary_matrix(results)
    svg = ET.fromstring(html[html.index("<svg") : html.index("</svg>") + len("</svg>")])
    width = float(svg.attrib["width"])
    legend = [t for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.text in DIMENSION_NAMES]
    assert [t.text for t in legend] == list(DIMENSION_NAMES)
    # at font size 10 a character is at most about 6 px wide
    assert all(float(t.attrib["x"]) + 6 * len(t.text or "") <= width for t in legend)


LAYOUT_PROBE = """<script>
addEventListener("load", () => setTimeout(() => {
  const heads = [...document.querySelectorAll("#results-table thead th")];
  document.body.dataset.layout = JSON.stringify({
    viewport: document.documentElement.clientWidth,
    columns: heads.map((th) => [th.textContent.trim(), th.getBoundingClientRect().right]),
  });
}, 500));
</script>"""
"""Appended to a copy of the report: the results table's column headers and where each ends,
measured once pytest-html's script has built the table."""


def column_edges(report: Path, width: int) -> tuple[int, dict[str, float]]:
    """The viewport's width and each results-table column's right edge, as chromium lays the
    report out in a window ``width`` pixels wide, every row's details shown (pytest-html's
    ``?collapsed=``, as its "Show all details" does)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs a browser to lay the report out: apt-get install -y chromium")
    probe = report.with_name("probe.html")
    probe.write_text(report.read_text().replace("</body>", f"{LAYOUT_PROBE}</body>"))
    dumped = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900",
         "--virtual-time-budget=20000", "--dump-dom", f"{probe.as_uri()}?collapsed="],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    found = re.search(r'data-layout="([^"]*)"', dumped.stdout)
    assert found, dumped.stdout[-2000:] + dumped.stderr[-2000:]
    layout = json.loads(html.unescape(found.group(1)))
    return layout["viewport"], dict(layout["columns"])


def test_long_log_lines_wrap_inside_their_cell_at_1400_px(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cells' extras hold the log tail, the analyses and the captured section: a long log
    line, with spaces or without, wraps inside its cell and every column of the results table
    stays in view (four were pushed out)."""
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    case = pytester.path / "corpus" / "n2_SIGKILL_r1_i5"
    shutil.copytree(FROZEN / case.name, case)
    (log,) = (case / "logs").glob("*.log")
    long_lines = [
        "[rank1]: RuntimeError: "
        + " ".join(f"frame{i}:/opt/venv/lib/site-packages" for i in range(40)),
        "[rank1]: payload=" + "A" * 600,
    ]
    log.write_text(log.read_text() + "\n".join(long_lines) + "\n")
    pytester.runpytest("corpus/", "--html=report.html", "-p", "no:cacheprovider")
    viewport, columns = column_edges(pytester.path / "report.html", 1400)
    assert {"Result", "Test", "Fault", "Dimension", "Duration", "Links"} <= set(columns)
    assert all(right <= viewport for right in columns.values()), (viewport, columns)


def test_summary_shows_the_decision_matrix_with_false_stop_and_false_restart() -> None:
    """A hang stopped (a false STOP: the job would have resumed) and a GPU error restarted (a
    false RESTART: a restart loop), beside two right decisions."""
    results = [
        make_result(FaultType.GPU_SLEEP, 1),
        make_result(FaultType.GPU_SLEEP, 0, decided=Decision.STOP, scores=labels(restart_correct="false")),
        make_result(FaultType.GPU_ERROR, 1),
        make_result(FaultType.GPU_ERROR, 0, decided=Decision.RESTART, scores=labels(restart_correct="false")),
    ]  # fmt: skip
    decisions = parse(summary_matrix(results)).findall("table")[1]
    caption = decisions.findtext("caption") or ""
    assert "false STOP 1/2 (50%, 9–91)" in caption and "false RESTART 1/2 (50%, 9–91)" in caption
    rows = {row[0].text: [c.text for c in row[1:]] for row in decisions.findall("tr")[1:]}
    assert rows == {"RESTART": ["1", "1", "0", "0"], "STOP": ["1", "1", "0", "0"]}
