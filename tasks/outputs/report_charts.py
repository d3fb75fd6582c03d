"""The fleet report's charts: horizontal bar charts as inline SVG, written here (no charting library).

One bar per label, stacked by series, each label written above its bar with its total, so a chart reads the
same at 390 px and on A4: positions along the bar are percentages of the chart's width, text keeps its size.
Each bar segment carries `data-series`, `data-label` and `data-value` (tests read them) and a `<title>` (shown
on hover); the legend is HTML under the chart, wrapping as the page does. Nothing runs in the browser.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROW = 40  # px per bar: its label line and the bar under it
BAR = 14  # the bar's height
LABEL_CHARS = 34  # a longer label is cut (whole in its tooltip and in the table beside the chart)
# Distinct on white and in print; "Other" is always grey.
PALETTE = ("#2c7fb8", "#e6550d", "#31a354", "#756bb1", "#de2d26", "#636363", "#fdae6b", "#9ecae1", "#a1d99b",
           "#bcbddc", "#8c6d31", "#e7969c")
OTHER = "#b0b7bf"


@dataclass
class Series:
    name: str
    values: list[float | int | None]
    color: str | None = None  # default: the palette, in order


def bar_chart(chart_id: str, title: str, labels: list[str], series: list[Series],
              shown: Callable[[Any], str] = lambda v: f"{v:,.0f}") -> str:
    """A figure: the title, the SVG (one stacked bar per label) and, for more than one series, its legend."""
    colors = _colors(series)
    totals = [sum(v or 0 for v in values) for values in zip(*(s.values for s in series))] if series else []
    top = max(totals, default=0) or 1
    parts = []
    for row, label in enumerate(labels):
        y = row * ROW
        cut = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        parts.append(f'<text x="0" y="{y + 13}" class="label">{_e(cut)}<title>{_e(label)}</title>'
                     f'<tspan class="total" dx="8">{_e(shown(totals[row]))}</tspan></text>')
        start = 0.0
        for s, color in zip(series, colors):
            value = s.values[row] or 0
            if value <= 0:
                continue
            width = value / top * 100
            parts.append(f'<rect x="{start:.3f}%" y="{y + 19}" width="{width:.3f}%" height="{BAR}" fill="{color}" '
                         f'data-series="{_e(s.name)}" data-label="{_e(label)}" data-value="{value}">'
                         f"<title>{_e(label)}, {_e(s.name)}: {_e(shown(value))}</title></rect>")
            start += width
    height = max(1, len(labels)) * ROW
    svg = (f'<svg class="bars" id="{chart_id}" role="img" aria-label="{_e(title)}" width="100%" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')
    legend = ""
    if len(series) > 1:
        legend = '<ul class="legend">' + "".join(
            f'<li><span class="swatch" style="background:{color}"></span>{_e(s.name)}</li>'
            for s, color in zip(series, colors)) + "</ul>"
    return f'<figure class="chart-box"><figcaption>{_e(title)}</figcaption>{svg}{legend}</figure>'


def _colors(series: list[Series]) -> list[str]:
    palette = iter(PALETTE * (len(series) // len(PALETTE) + 1))
    return [s.color or (OTHER if s.name == "Other" else next(palette)) for s in series]


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
