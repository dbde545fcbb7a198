"""Summaries of benchmark runs: per cell and method means, the best method, the verdict against
the baselines, the terminal table, and the JSON and CSV files.

Aggregation: a cell's figure for a method is the mean over its runs (seeds) that did not fail
(:mod:`mbfg_ros.benchmark.metrics`); failed runs are counted apart. The best method of a cell
(marked ``*``) is the one with the smallest mean among the methods with no failed run there.
"""
from __future__ import annotations

import csv
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbfg_ros.benchmark.methods import BASELINES, METHODS

FIGURES = ("position", "velocity", "acceleration", "force", "cpu", "position_last_half")
TABLE_METRICS = (("position", "position RMSE (rad)"), ("velocity", "velocity RMSE (rad/s)"),
                 ("acceleration", "acceleration RMSE (rad/s^2)"))
COST_METRICS = (("force", "closure force RMSE (N)"), ("cpu", "CPU per step (ms)"))
MBFG_VARIANTS = ("mbfg_online", "mbfg_lagged", "mbfg_online_g", "mbfg_lagged_g", "mbfg_default",
                 "mbfg_default_lagged")


@dataclass
class Summary:
    """One method in one cell over its runs: ``mean``/``std`` of every figure over the runs that
    did not fail; ``failures`` of ``runs`` failed (``reasons`` counts why)."""
    key: str
    cell: dict
    method: str
    runs: int
    failures: int
    mean: dict = field(default_factory=dict)
    std: dict = field(default_factory=dict)
    reasons: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.runs > 0 and self.failures == 0

    def as_dict(self) -> dict:
        return {"key": self.key, "cell": self.cell, "method": self.method, "runs": self.runs,
                "failures": self.failures, "mean": self.mean, "std": self.std,
                "reasons": self.reasons, "info": self.info}


def _cell_order(cell: dict) -> tuple:
    return (cell["mechanism"], cell["sensors"], cell["gravity_error"], cell["period"])


def summarize(records: list[dict]) -> list[Summary]:
    """Per (cell, method) summaries, in grid order then method order."""
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    cells: dict[str, dict] = {}
    for rec in records:
        cells[rec["key"]] = rec["cell"]
        for m, r in rec["methods"].items():
            runs[(rec["key"], m)].append(r)
    order = list(METHODS)
    out = []
    for key in sorted(cells, key=lambda k: _cell_order(cells[k])):
        for m in sorted({mm for (kk, mm) in runs if kk == key}, key=order.index):
            rs = runs[(key, m)]
            good = [r for r in rs if not r["failed"]]
            s = Summary(key, cells[key], m, len(rs), len(rs) - len(good))
            for f in FIGURES:
                vals = np.array([r[f] for r in good], float)
                vals = vals[np.isfinite(vals)]
                s.mean[f] = float(vals.mean()) if vals.size else float("nan")
                s.std[f] = float(vals.std()) if vals.size > 1 else 0.0 if vals.size else float("nan")
            s.reasons = dict(Counter(r["reason"].split(":")[0] for r in rs if r["failed"]))
            gs = [r["info"].get("gravity_scale") for r in good if "gravity_scale" in r.get("info", {})]
            if gs and m.endswith("_g"):
                s.info["gravity_scale"] = float(np.mean(gs))
            out.append(s)
    return out


def best(summaries: list[Summary], metric: str, candidates: tuple[str, ...] | None = None) -> dict[str, str]:
    """{cell key: method} with the smallest mean ``metric`` among the methods (optionally only
    ``candidates``) with no failed run in that cell."""
    out: dict[str, tuple[float, str]] = {}
    for s in summaries:
        if candidates is not None and s.method not in candidates:
            continue
        v = s.mean.get(metric, float("nan"))
        if s.ok and math.isfinite(v) and (s.key not in out or v < out[s.key][0]):
            out[s.key] = (v, s.method)
    return {k: m for k, (v, m) in out.items()}


def verdicts(summaries: list[Summary]) -> list[dict]:
    """Per cell: the best baseline filter (position RMSE) and each mbfg_ros variant against it.

    ``ratio`` = best baseline RMSE / variant RMSE (above 1: the variant is better, by that
    factor). ``beats``: the variant did not fail and is below the best baseline, or every
    baseline failed in the cell."""
    by_cell: dict[str, dict[str, Summary]] = defaultdict(dict)
    for s in summaries:
        by_cell[s.key][s.method] = s
    out = []
    for key, ms in by_cell.items():
        base = [ms[b] for b in BASELINES if b in ms]
        if not base:
            continue
        ok = [b for b in base if b.ok]
        top = min(ok, key=lambda b: b.mean["position"]) if ok else None
        top_v = min(ok, key=lambda b: b.mean["velocity"]) if ok else None
        row = {"key": key, "cell": base[0].cell,
               "best_baseline": top.method if top else None,
               "best_baseline_position": top.mean["position"] if top else None,
               "best_baseline_velocity_method": top_v.method if top_v else None,
               "best_baseline_velocity": top_v.mean["velocity"] if top_v else None,
               "baseline_failures": {b.method: f"{b.failures}/{b.runs}" for b in base},
               "batch_position": ms["batch"].mean["position"] if "batch" in ms and ms["batch"].ok else None,
               "batch_failures": f"{ms['batch'].failures}/{ms['batch'].runs}" if "batch" in ms else None,
               "variants": {}}
        for v in MBFG_VARIANTS:
            if v not in ms:
                continue
            s = ms[v]
            val = s.mean["position"] if s.ok else None
            vel = s.mean["velocity"] if s.ok else None
            ratio = (top.mean["position"] / val) if (top and val) else None
            ratio_v = (top_v.mean["velocity"] / vel) if (top_v and vel) else None
            beats = bool(s.ok and (top is None or val < top.mean["position"]))
            # the bar for the newest estimate: position and velocity both at most the best
            # filter's (each filter's best figure), no failed run
            both = bool(s.ok and (top is None or (val <= top.mean["position"] and vel <= top_v.mean["velocity"])))
            batch = row["batch_position"]
            row["variants"][v] = {"position": val, "velocity": vel, "failures": f"{s.failures}/{s.runs}",
                                  "ratio": ratio, "ratio_velocity": ratio_v, "beats": beats,
                                  "beats_both": both,
                                  "to_batch": (val / batch) if (val and batch) else None}
        out.append(row)
    return out


# --------------------------------------------------------------------------------------------
# terminal table
def _fmt(s: Summary | None, metric: str, is_best: bool) -> str:
    if s is None:
        return ""
    if s.failures and s.failures == s.runs:
        return "FAIL"
    v = s.mean.get(metric, float("nan"))
    text = "-" if not math.isfinite(v) else f"{v:.3g}"
    if is_best:
        text += "*"
    if s.failures:
        text += f" F{s.failures}"
    return text


def table(summaries: list[Summary]) -> str:
    """The methods x cells table (one block per mechanism / sensor set / gravity error)."""
    if not summaries:
        return "no runs\n"
    lines = []
    blocks: dict[str, list[Summary]] = defaultdict(list)
    for s in summaries:
        c = s.cell
        blocks[(c["mechanism"], c["sensors"], c["gravity_error"])].append(s)
    bests = {m: best(summaries, m) for m, _ in TABLE_METRICS + COST_METRICS}
    for (mech, sensors, gerr), ss in blocks.items():
        periods = sorted({s.cell["period"] for s in ss})
        methods = [m for m in METHODS if any(s.method == m for s in ss)]
        at = {(s.method, s.cell["period"]): s for s in ss}
        runs = max(s.runs for s in ss)
        lines.append("")
        lines.append(f"== {mech}, {sensors} set, gravity error +{gerr:g} m/s^2 (model g = "
                     f"{9.81 - gerr:.2f}), {runs} run(s) per cell; readings every p steps of 5 ms")
        for group in (TABLE_METRICS, COST_METRICS):
            w = 11
            head1 = f"{'':16s}" + "".join(f"| {label:<{w * len(periods) - 2}s}" for _, label in group)
            head2 = f"{'method':16s}" + "".join("|" + "".join(f" {'p=' + str(p):<{w - 1}s}" for p in periods)
                                                  for _ in group)
            lines += [head1, head2]
            for m in methods:
                row = f"{METHODS[m].label:16s}"
                for metric, _ in group:
                    row += "|"
                    for p in periods:
                        s = at.get((m, p))
                        is_best = s is not None and bests[metric].get(s.key) == m and metric != "cpu"
                        row += f" {_fmt(s, metric, is_best):<{w - 1}s}"
                lines.append(row.rstrip())
    lines.append("")
    lines.append("* best in the cell among methods with no failed run (CPU not marked); "
                 "F k: k runs failed and are left out of the mean; FAIL: every run failed.")
    return "\n".join(lines) + "\n"


def verdict_text(rows: list[dict]) -> str:
    """One line per cell: does mbfg_ros beat the best baseline filter, and by how much."""
    out = ["", "Verdict per cell (position RMSE; ratio = best baseline / mbfg_ros, > 1 is better):"]
    for r in rows:
        base = (f"{METHODS[r['best_baseline']].label} {r['best_baseline_position']:.3g}"
                if r["best_baseline"] else "every baseline failed")
        parts = []
        for v, x in r["variants"].items():
            label = METHODS[v].label.replace("mbfg ", "")
            if x["position"] is None:
                parts.append(f"{label} FAIL({x['failures']})")
            elif x["ratio"] is None:
                parts.append(f"{label} {x['position']:.3g} (wins)")
            else:
                parts.append(f"{label} x{x['ratio']:.2f}{'' if x['beats'] else ' (loses)'}")
        out.append(f"  {r['key']:28s} best baseline: {base:24s} mbfg: " + ", ".join(parts))
    return "\n".join(out) + "\n"


def verdict_markdown(rows: list[dict]) -> str:
    """The verdict as a Markdown table: per cell, the best baseline filter and each mbfg_ros
    variant's position RMSE with its ratio to it (bold where the variant beats it)."""
    variants = [v for v in MBFG_VARIANTS if any(v in r["variants"] for r in rows)]
    head = ["cell", "best baseline (rad)", "batch (rad)"] + [METHODS[v].label for v in variants]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["best_baseline"]:
            base = f"{METHODS[r['best_baseline']].label} {r['best_baseline_position']:.3g}"
        else:
            base = "all failed (" + ", ".join(f"{METHODS[k].label} {v}" for k, v in r["baseline_failures"].items()) + ")"
        batch = (f"{r['batch_position']:.3g}" if r["batch_position"] is not None
                 else (f"failed {r['batch_failures']}" if r["batch_failures"] else "-"))
        cells = [r["key"], base, batch]
        for v in variants:
            x = r["variants"].get(v)
            if x is None:
                cells.append("-")
            elif x["position"] is None:
                cells.append(f"failed {x['failures']}")
            else:
                text = f"{x['position']:.3g}"
                text += f" (x{x['ratio']:.2f})" if x["ratio"] is not None else " (only one)"
                cells.append(f"**{text}**" if x["beats"] else text)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def headline_markdown(rows: list[dict], causal: str = "mbfg_default", lagged: str = "mbfg_default_lagged") -> str:
    """The comparison the project holds itself to, like with like: the newest (causal) estimate of
    the rig's one configuration against the best filter by position and by velocity, and its
    lagged (smoothed) estimate against the batch reference; then the counts."""
    head = ["cell", "best filter: position (rad)", "velocity (rad/s)", f"{METHODS[causal].label}: position",
            "velocity", "both <= best", "batch (rad)", f"{METHODS[lagged].label} / batch"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    n = wins = lag_ok = lag_n = tracked = every_failed = fails = 0
    for r in rows:
        x, y = r["variants"].get(causal), r["variants"].get(lagged)
        if x is None:
            continue
        n += 1
        if r["best_baseline"]:
            bp = f"{METHODS[r['best_baseline']].label} {r['best_baseline_position']:.3g}"
            bv = f"{METHODS[r['best_baseline_velocity_method']].label} {r['best_baseline_velocity']:.3g}"
        else:
            every_failed += 1
            bp = bv = "all failed"
        if x["position"] is None:
            fails += 1
            p = v = f"failed {x['failures']}"
        else:
            p = f"{x['position']:.3g}" + (f" (x{1 / x['ratio']:.2f})" if x["ratio"] else "")
            v = f"{x['velocity']:.3g}" + (f" (x{1 / x['ratio_velocity']:.2f})" if x["ratio_velocity"] else "")
            if not r["best_baseline"]:
                tracked += 1
        wins += x["beats_both"]
        batch = (f"{r['batch_position']:.3g}" if r["batch_position"] is not None
                 else (f"failed {r['batch_failures']}" if r["batch_failures"] else "-"))
        if y is not None and y["to_batch"] is not None:
            lag_n += 1
            lag_ok += y["to_batch"] <= 1.1
            lb = f"{y['to_batch']:.2f}"
        else:
            lb = "-" if y is None else (f"failed {y['failures']}" if y["position"] is None else "no batch")
        out.append("| " + " | ".join([r["key"], bp, bv, p, v, "yes" if x["beats_both"] else "**no**", batch, lb]) + " |")
    out += ["", f"Ratios are {METHODS[causal].label} / best filter (below 1: better). Position and velocity "
                f"both at most the best filter's, without a failed run: {wins} of {n} cells "
                f"({every_failed} where every filter failed: tracked in {tracked}); failed runs in {fails} cells. "
                f"Lagged within 1.1x of the batch reference: {lag_ok} of {lag_n} cells with a batch result."]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# files
def write_json(path: Path, options: dict, records: list[dict], summaries: list[Summary],
               extra: dict | None = None) -> None:
    """Every figure: the options, every run, the summaries and the verdicts."""
    doc = {"options": options,
           "methods": {k: {"label": m.label, "kind": m.kind} for k, m in METHODS.items()},
           "summary": [s.as_dict() for s in summaries], "verdicts": verdicts(summaries),
           "runs": sorted(records, key=lambda r: (_cell_order(r["cell"]), r["seed"]))}
    if extra:
        doc.update(extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=_json_default) + "\n")


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(type(x).__name__)


CSV_COLUMNS = ["level", "mechanism", "sensors", "gravity_error", "period", "method", "seed",
               "runs", "failures", "failed", "reason"] + \
              [f"{f}{suffix}" for f in FIGURES for suffix in ("", "_std")] + ["best_position"]


def write_csv(path: Path, records: list[dict], summaries: list[Summary]) -> None:
    """One row per (cell, method) mean (level=mean) and per run (level=run)."""
    bests = best(summaries, "position")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for s in summaries:
            row = {"level": "mean", **{k: s.cell[k] for k in ("mechanism", "sensors", "gravity_error", "period")},
                   "method": s.method, "runs": s.runs, "failures": s.failures,
                   "reason": "; ".join(f"{k} x{v}" for k, v in s.reasons.items()),
                   "best_position": int(bests.get(s.key) == s.method)}
            for f in FIGURES:
                row[f] = s.mean[f]
                row[f + "_std"] = s.std[f]
            w.writerow(row)
        for rec in sorted(records, key=lambda r: (_cell_order(r["cell"]), r["seed"])):
            for m, r in rec["methods"].items():
                row = {"level": "run", **{k: rec["cell"][k] for k in ("mechanism", "sensors", "gravity_error", "period")},
                       "method": m, "seed": rec["seed"], "runs": 1, "failures": int(r["failed"]),
                       "failed": int(r["failed"]), "reason": r["reason"]}
                for f in FIGURES:
                    row[f] = r[f]
                w.writerow(row)
