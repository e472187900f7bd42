#!/usr/bin/env python3
"""Plots `scheduler_decision_bench sweep` (issue 48 item 2): microseconds per decision
against the number of centers (left) and against the number of feasible centers (right),
log-log, as an SVG with no library beyond Python's own.

    build/tests/bench/scheduler_decision_bench sweep | tests/bench/plot_placement.py > docs/placement-scaling.svg
"""
import math
import sys

SERIES = [("decisions_per_s", "decision (indexed)", "#1f77b4"),
          ("scan_per_s", "decision visiting every center", "#aaaaaa"),
          ("recorded_per_s", "decision + explanation kept", "#2ca02c"),
          ("explained_per_s", "decision + explanation built", "#d62728")]


def read_rows(lines):
    header, rows = None, []
    for line in lines:
        if not line.startswith("csv:"):
            continue
        fields = line[4:].strip().split(",")
        if header is None:
            header = fields
        else:
            rows.append({k: (v if k == "table" else float(v)) for k, v in zip(header, fields)})
    return rows


def panel(rows, x_key, x_label, title, left, width=420, height=300):
    xs = [r[x_key] for r in rows]
    ys = [1e6 / r[k] for r in rows for k, _, _ in SERIES if r[k] > 0]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    top = 40

    def px(x):
        return left + 50 + (math.log10(x) - x0) / max(1, x1 - x0) * (width - 60)

    def py(y):
        return top + height - (math.log10(y) - y0) / max(1, y1 - y0) * height

    out = [f'<text x="{left + width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for e in range(x0, x1 + 1):
        x = px(10 ** e)
        out.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{top + height}" stroke="#eee"/>')
        out.append(f'<text x="{x}" y="{top + height + 16}" text-anchor="middle" font-size="11">{10 ** e:g}</text>')
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{left + 50}" y1="{y}" x2="{left + width - 10}" y2="{y}" stroke="#eee"/>')
        out.append(f'<text x="{left + 45}" y="{y + 4}" text-anchor="end" font-size="11">{10 ** e:g}</text>')
    out.append(f'<text x="{left + width / 2}" y="{top + height + 34}" text-anchor="middle" font-size="12">{x_label}</text>')
    out.append(f'<text x="{left + 12}" y="{top + height / 2}" font-size="12" '
               f'transform="rotate(-90 {left + 12} {top + height / 2})" text-anchor="middle">µs per decision</text>')
    ordered = sorted(rows, key=lambda r: r[x_key])
    for key, _, color in SERIES:
        points = " ".join(f"{px(r[x_key]):.1f},{py(1e6 / r[key]):.1f}" for r in ordered if r[key] > 0)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
    return out


def main():
    rows = read_rows(sys.stdin)
    if not rows:
        sys.exit("no csv: lines on stdin (run scheduler_decision_bench sweep)")
    by_size = [r for r in rows if r["table"] == "size"]
    by_share = [r for r in rows if r["table"] == "share"]
    share = by_size[0]["offer_fraction"] * 100
    parts = panel(by_size, "centers", "centers in the federation",
                  f"by federation size (spec at {share:g}% of centers)", 0)
    parts += panel(by_share, "feasible", "feasible centers (10,000 in the federation)",
                   "by feasible centers", 460)
    for i, (_, label, color) in enumerate(SERIES):
        y = 400 + 16 * i
        parts.append(f'<line x1="60" y1="{y}" x2="90" y2="{y}" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="96" y="{y + 4}" font-size="12">{label}</text>')
    print('<svg xmlns="http://www.w3.org/2000/svg" width="900" height="470" font-family="sans-serif">')
    print('<rect width="100%" height="100%" fill="white"/>')
    print("\n".join(parts))
    print("</svg>")


if __name__ == "__main__":
    main()
