"""Figures in the paper's style: RMSE against the sensor sampling period (in time steps), one
figure per mechanism / sensor set / gravity error, log scale; and the CPU cost per step.

Each figure has four panels (position, velocity, acceleration, closure force RMSE); each method
is a line over the periods (mean over its runs that did not fail). A period where every run of
a method failed has no point; one where some failed is drawn hollow. Small PNGs (matplotlib,
Agg backend).
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mbfg_ros.benchmark.methods import METHODS  # noqa: E402
from mbfg_ros.benchmark.report import Summary  # noqa: E402

PANELS = (("position", "position RMSE (rad)"), ("velocity", "velocity RMSE (rad/s)"),
          ("acceleration", "acceleration RMSE (rad/s²)"), ("force", "closure force RMSE (N)"))
STYLE = {"dekf": ("tab:blue", "o", "-"), "ukf": ("tab:orange", "s", "-"),
         "error_ekf": ("tab:green", "^", "-"), "cekf": ("tab:olive", "d", "-"),
         "batch": ("black", "D", ":"),
         "mbfg_online": ("tab:purple", "v", "--"), "mbfg_lagged": ("tab:brown", "<", "--"),
         "mbfg_online_g": ("tab:red", "P", "-"), "mbfg_lagged_g": ("tab:pink", "X", "-"),
         "mbfg_default": ("black", "*", "-"), "mbfg_default_lagged": ("tab:gray", "*", ":")}
DPI = 72


def block_name(cell: dict) -> str:
    return f"{cell['mechanism']}_{cell['sensors']}_g{cell['gravity_error']:g}"


def write_figures(summaries: list[Summary], folder: Path) -> list[Path]:
    """One PNG per block (mechanism, sensor set, gravity error) and cpu.png; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks: dict[str, list[Summary]] = defaultdict(list)
    for s in summaries:
        blocks[block_name(s.cell)].append(s)
    paths = [_block_figure(name, ss, folder / f"rmse_{name}.png") for name, ss in blocks.items()]
    paths.append(_cpu_figure(summaries, folder / "cpu.png"))
    return paths


def _block_figure(name: str, ss: list[Summary], path: Path) -> Path:
    c = ss[0].cell
    fig, axes = plt.subplots(1, len(PANELS), figsize=(13, 3.3))
    methods = [m for m in METHODS if any(s.method == m for s in ss)]
    failed_all = []
    for ax, (metric, label) in zip(axes, PANELS):
        for m in methods:
            pts = sorted((s.cell["period"], s) for s in ss if s.method == m)
            color, marker, line = STYLE.get(m, ("grey", "o", "-"))
            xs, ys, hollow = [], [], []
            for p, s in pts:
                v = s.mean.get(metric, math.nan)
                if s.failures == s.runs or not math.isfinite(v) or v <= 0:
                    if metric == "position" and s.failures == s.runs:
                        failed_all.append(f"{METHODS[m].label} p={p}")
                    continue
                xs.append(p)
                ys.append(v)
                hollow.append(s.failures > 0)
            if not xs:
                continue
            ax.plot(xs, ys, line, color=color, lw=1.2, label=METHODS[m].label)
            for x, y, h in zip(xs, ys, hollow):
                ax.plot([x], [y], marker, color=color, ms=5, mfc="none" if h else color)
        ax.set_yscale("log")
        ax.set_xlabel("sensor period (steps of 5 ms)")
        ax.set_title(label, fontsize=9)
        ax.set_xticks(sorted({s.cell["period"] for s in ss}))
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=7, loc="best")
    title = (f"{c['mechanism']}, {c['sensors']} set, gravity error +{c['gravity_error']:g} m/s²"
             f" ({ss[0].runs} runs per cell)")
    if failed_all:
        title += "\nevery run failed: " + ", ".join(failed_all[:8]) + (" ..." if len(failed_all) > 8 else "")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _cpu_figure(summaries: list[Summary], path: Path) -> Path:
    """Mean CPU ms per step of each method, per mechanism (over all its cells and runs)."""
    mechs = sorted({s.cell["mechanism"] for s in summaries})
    methods = [m for m in METHODS if any(s.method == m for s in summaries)]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / max(1, len(mechs))
    for i, mech in enumerate(mechs):
        vals = []
        for m in methods:
            xs = [s.mean["cpu"] for s in summaries if s.method == m and s.cell["mechanism"] == mech
                  and math.isfinite(s.mean.get("cpu", math.nan))]
            vals.append(sum(xs) / len(xs) if xs else 0.0)
        ax.bar([j + i * width for j in range(len(methods))], vals, width, label=mech)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(methods))])
    ax.set_xticklabels([METHODS[m].label for m in methods], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("CPU ms per 5 ms step")
    ax.set_yscale("log")
    ax.axhline(5.0, color="grey", lw=0.8, ls="--")
    ax.text(0, 5.3, "real time (5 ms)", fontsize=7, color="grey")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
