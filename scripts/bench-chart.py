#!/usr/bin/env python3
"""Draw the benchmark's main table as an SVG bar chart.

    scripts/bench-chart.py [TABLE.md] [-o OUT.svg] [--column NAME] [--linear]

Reads the first Markdown table in TABLE.md (default docs/benchmarks.md; the
table.md that scripts/bench writes under /var/cache/pyprof-bpf/bench/ works
too) whose header has the columns Hz, threads, depth, profiler and --column
(default "CPU/sample (us)"), and writes one panel per (threads, depth) cell:
for each rate, one bar per profiler, on a log scale unless --linear. Empty
cells are left out. Python 3 standard library only; the output is a plain
SVG with no script, so it can be committed and shown by any Markdown viewer.
"""
import argparse
import math
import os
import re
import sys
from xml.sax.saxutils import escape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ("Hz", "threads", "depth", "profiler")
# Colour-blind-safe palette (Okabe-Ito), then greys.
PALETTE = ("#0072B2", "#56B4E9", "#009E73", "#E69F00", "#D55E00", "#CC79A7",
           "#F0E442", "#000000", "#999999", "#666666")
PANEL_W, PANEL_H = 440, 260
MARGIN_L, MARGIN_T, MARGIN_B = 60, 40, 40


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_table(path, column):
    """The rows (dicts) of the first table with KEYS and column."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            continue
        head = cells(line)
        if not all(k in head for k in KEYS + (column,)):
            continue
        rows = []
        for body in lines[i + 2:]:
            if not body.lstrip().startswith("|"):
                break
            rows.append(dict(zip(head, cells(body))))
        return rows
    sys.exit(f"{path}: no table with the columns {', '.join(KEYS + (column,))}")


def number(text):
    """The leading number of a cell ("1.05 (0.9-1.2)" -> 1.05), None if empty."""
    m = re.match(r"-?[0-9][0-9,]*(\.[0-9]+)?", text.replace(" ", ""))
    return float(m.group(0).replace(",", "")) if m else None


def nice_ticks(lo, hi, log):
    if log:
        return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    step = 10 ** math.floor(math.log10(hi / 5)) if hi > 0 else 1
    while hi / step > 8:
        step *= 2
    return [k * step for k in range(int(hi / step) + 2)]


def label(v):
    return f"{v:g}" if v < 1e6 else f"{v:.0e}"


def panel(out, x0, y0, title, groups, profilers, colours, lo, hi, log, column):
    """One (threads, depth) panel: groups is [(rate, {profiler: value})]."""
    w, h = PANEL_W - MARGIN_L - 10, PANEL_H - MARGIN_T - MARGIN_B
    ox, oy = x0 + MARGIN_L, y0 + MARGIN_T

    def y_of(v):
        f = (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) if log \
            else v / hi
        return oy + h - f * h

    out.append(f'<text x="{x0 + PANEL_W / 2}" y="{y0 + 22}" class="title">{escape(title)}</text>')
    for t in nice_ticks(lo, hi, log):
        if t < lo or t > hi:
            continue
        y = y_of(t)
        out.append(f'<line x1="{ox}" x2="{ox + w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{ox - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
                   f'{label(t)}</text>')
    out.append(f'<line x1="{ox}" x2="{ox}" y1="{oy}" y2="{oy + h}" class="axis"/>')
    out.append(f'<text transform="translate({x0 + 14},{oy + h / 2}) rotate(-90)" '
               f'class="tick" text-anchor="middle">{escape(column)}</text>')
    gw = w / max(len(groups), 1)
    bw = (gw - 16) / max(len(profilers), 1)
    for g, (rate, vals) in enumerate(groups):
        gx = ox + g * gw + 8
        for k, p in enumerate(profilers):
            v = vals.get(p)
            if v is None or v <= 0:
                continue
            y = y_of(max(v, lo))
            out.append(f'<rect x="{gx + k * bw:.1f}" y="{y:.1f}" width="{bw - 1:.1f}" '
                       f'height="{oy + h - y:.1f}" fill="{colours[p]}">'
                       f'<title>{escape(p)}, {rate} Hz: {v:g}</title></rect>')
        out.append(f'<text x="{ox + g * gw + gw / 2:.1f}" y="{oy + h + 16}" class="tick" '
                   f'text-anchor="middle">{escape(rate)} Hz</text>')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", nargs="?", default=os.path.join(REPO, "docs", "benchmarks.md"))
    ap.add_argument("-o", "--output",
                    default=os.path.join(REPO, "docs", "img", "bench-cpu-per-sample.svg"))
    ap.add_argument("--column", default="CPU/sample (us)")
    ap.add_argument("--linear", action="store_true", help="a linear scale, not a log one")
    a = ap.parse_args()

    rows = read_table(a.table, a.column)
    profilers, cellkeys, data = [], [], {}
    for r in rows:
        v = number(r[a.column])
        if r["profiler"] not in profilers:
            profilers.append(r["profiler"])
        ck = (int(number(r["threads"])), int(number(r["depth"])))
        if ck not in cellkeys:
            cellkeys.append(ck)
        data.setdefault(ck, {}).setdefault(r["Hz"], {})[r["profiler"]] = v
    values = [v for c in data.values() for g in c.values() for v in g.values() if v]
    if not values:
        sys.exit(f"{a.table}: no number in column {a.column!r}")
    log = not a.linear
    lo = 10.0 ** math.floor(math.log10(min(values))) if log else 0.0
    hi = 10.0 ** math.ceil(math.log10(max(values))) if log else max(values) * 1.05
    colours = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(profilers)}

    cols = 2
    nrows = (len(cellkeys) + cols - 1) // cols
    legend_h = 22 * ((len(profilers) + 1) // 2) + 10
    width, height = cols * PANEL_W, nrows * PANEL_H + legend_h + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           '<style>.title{font-size:14px;font-weight:bold;text-anchor:middle}'
           '.tick{font-size:11px;fill:#333}.grid{stroke:#ddd}.axis{stroke:#333}'
           '.legend{font-size:12px}</style>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" class="title">{escape(a.column)} by rate, '
           f'{"log scale, " if log else ""}lower is better</text>']
    for i, ck in enumerate(cellkeys):
        x0, y0 = (i % cols) * PANEL_W, 30 + (i // cols) * PANEL_H
        groups = sorted(data[ck].items(), key=lambda kv: number(kv[0]))
        panel(out, x0, y0, f"{ck[0]} thread{'s' if ck[0] != 1 else ''}, {ck[1]} frames deep",
              groups, profilers, colours, lo, hi, log, a.column)
    ly = 30 + nrows * PANEL_H + 10
    for i, p in enumerate(profilers):
        x, y = 20 + (i % 2) * (width - 40) / 2, ly + (i // 2) * 22
        out.append(f'<rect x="{x:.1f}" y="{y}" width="14" height="14" fill="{colours[p]}"/>')
        out.append(f'<text x="{x + 20:.1f}" y="{y + 12}" class="legend">{escape(p)}</text>')
    out.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"{a.output}: {len(cellkeys)} panels, {len(profilers)} profilers, {len(rows)} rows")


if __name__ == "__main__":
    main()
