"""Pass rates per fault type and dimension as an inline SVG bar chart: one bar per dimension,
its 95 % interval as a whisker (no dependency: the HTML report embeds the markup)."""

from __future__ import annotations

from html import escape

from pytest_faultloop.report.aggregate import GroupRates, Rate
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES

_BAR = 10
_GAP = 3
_GROUP_GAP = 14
_HEIGHT = 120
_LEFT = 34
_TOP = 10
_BOTTOM = 70
_LEGEND_STEP = 110
"""Room for one legend entry: its swatch and the longest dimension name at font size 10."""
_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2")


def rate_chart(groups: dict[str, GroupRates]) -> str:
    """Bars of each group's pass rates (one colour per dimension) with interval whiskers."""
    shown = {name: g for name, g in groups.items() if any(r.total for r in g.rates.values())}
    if not shown:
        return ""
    group_width = len(DIMENSION_NAMES) * (_BAR + _GAP) + _GROUP_GAP
    # as wide as the bars or the legend below them, whichever is wider (a few fault types
    # would otherwise clip the legend)
    width = _LEFT + max(len(shown) * group_width, len(DIMENSION_NAMES) * _LEGEND_STEP) + 10
    height = _TOP + _HEIGHT + _BOTTOM
    parts = [
        f'<svg class="faultloop-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height + 18}" role="img" aria-label="pass rates with 95% intervals">'
    ]
    for tick in (0, 50, 100):
        y = _y(tick / 100)
        parts.append(f'<line x1="{_LEFT}" x2="{width - 10}" y1="{y}" y2="{y}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{_LEFT - 4}" y="{y + 4}" font-size="10" text-anchor="end">{tick}%</text>'
        )
    for index, (name, group) in enumerate(shown.items()):
        left = _LEFT + index * group_width
        for offset, dimension in enumerate(DIMENSION_NAMES):
            parts += _bar(
                left + offset * (_BAR + _GAP), group.rates[dimension], offset, f"{name} {dimension}"
            )
        label_x = left + (len(DIMENSION_NAMES) * (_BAR + _GAP)) / 2
        parts.append(
            f'<text x="{label_x}" y="{_TOP + _HEIGHT + 12}" font-size="10" '
            f'text-anchor="end" transform="rotate(-40 {label_x} {_TOP + _HEIGHT + 12})">'
            f"{escape(name)}</text>"
        )
    legend_y = height + 10
    for offset, dimension in enumerate(DIMENSION_NAMES):
        x = _LEFT + offset * _LEGEND_STEP
        parts.append(
            f'<rect x="{x}" y="{legend_y - 8}" width="8" height="8" fill="{_COLOURS[offset]}"/>'
        )
        parts.append(f'<text x="{x + 11}" y="{legend_y}" font-size="10">{dimension}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bar(x: float, rate: Rate, colour: int, title: str) -> list[str]:
    if not rate.total:
        return []
    value = rate.passed / rate.total
    low, high = rate.interval
    centre = x + _BAR / 2
    return [
        f'<rect x="{x}" y="{_y(value)}" width="{_BAR}" height="{_y(0) - _y(value)}" '
        f'fill="{_COLOURS[colour]}"><title>{escape(title)}: {escape(str(rate))}</title></rect>',
        f'<line x1="{centre}" x2="{centre}" y1="{_y(high)}" y2="{_y(low)}" stroke="#222"/>',
        f'<line x1="{centre - 3}" x2="{centre + 3}" y1="{_y(high)}" y2="{_y(high)}" '
        'stroke="#222"/>',
        f'<line x1="{centre - 3}" x2="{centre + 3}" y1="{_y(low)}" y2="{_y(low)}" stroke="#222"/>',
    ]


def _y(fraction: float) -> float:
    return round(_TOP + _HEIGHT * (1 - fraction), 1)
