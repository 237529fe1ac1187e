"""Grouped bar charts as hand-written SVG (no plotting library needed)."""

from __future__ import annotations

from typing import Dict, List

COLORS = ["#d95f02", "#7570b3", "#1b9e77"]


def bars(title: str, groups: Dict[str, List[float]], series: List[str], unit: str = "") -> str:
    """`groups`: label -> one value per series."""
    w, h, top, left, bottom = 640, 320, 40, 50, 60
    vmax = max(max(v) for v in groups.values()) or 1.0
    plot_w, plot_h = w - left - 20, h - top - bottom
    gw = plot_w / len(groups)
    bw = gw * 0.8 / len(series)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{top + plot_h}" x2="{w - 20}" y2="{top + plot_h}" stroke="black"/>']
    for gi, (label, vals) in enumerate(groups.items()):
        x0 = left + gi * gw + gw * 0.1
        for si, v in enumerate(vals):
            bh = plot_h * v / vmax
            x, y = x0 + si * bw, top + plot_h - bh
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="{COLORS[si % 3]}"/>')
            out.append(f'<text x="{x + bw / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{v:g}{unit}</text>')
        out.append(f'<text x="{x0 + gw * 0.4:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{label}</text>')
    for si, s in enumerate(series):
        out.append(f'<rect x="{left + si * 150}" y="{h - 22}" width="12" height="12" fill="{COLORS[si % 3]}"/>')
        out.append(f'<text x="{left + si * 150 + 16}" y="{h - 12}">{s}</text>')
    out.append("</svg>")
    return "\n".join(out)
