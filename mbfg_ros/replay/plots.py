"""PNG figures of a replay (matplotlib, Agg backend; small files, time in s from the epoch).

- ``dof_<joint>.png``: each DOF's position, velocity and acceleration: estimate, truth (if any)
  and the estimate +-3 sigma band (position and velocity; needs the estimator's covariance,
  which ``mbfg replay --plots`` turns on; lagged runs have no band);
- ``joints.png``: every joint's position, velocity and acceleration estimates (dashed: truth);
- ``errors.png`` (with truth): estimate - truth per joint, with the +-3 sigma band of the DOFs
  and the RMSE window (the first ``skip`` seconds shaded);
- ``forces.png``: closure reactions (the components that are not identically zero) and
  load-cell readings, estimate vs truth;
- ``efforts.png``: actuator efforts of the actuated joints (if any);
- ``residuals.png``: each sensor's residual (measured - predicted at the estimate) in noise
  sigmas with the +-3 sigma lines, and its histogram against a unit Gaussian.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mbfg_ros.replay.metrics import COMPONENTS, Comparison, era_starts, significant_components  # noqa: E402
from mbfg_ros.replay.residuals import Residuals, load_cell_unit  # noqa: E402
from mbfg_ros.replay.session import ReplayResult  # noqa: E402

DPI = 80
EST, TRUTH, BAND = "tab:blue", "black", "tab:blue"


def _units(mech, j: int) -> tuple[str, str, str]:
    return ("rad", "rad/s", "rad/s^2") if mech.angular[j] else ("m", "m/s", "m/s^2")


def _save(fig, path: Path, files: list[Path]) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    files.append(path)


def _shade_skip(ax, res: ReplayResult, comparison: Comparison | None) -> None:
    if comparison is not None and comparison.skip > 0:
        for start in np.unique(era_starts(res.estimates)):
            ax.axvspan(start, start + comparison.skip, color="0.9", lw=0)


def write_plots(out_dir: str | Path, res: ReplayResult, comparison: Comparison | None,
                residuals: dict[str, Residuals]) -> list[Path]:
    """Write the figures into ``out_dir`` (created if needed); returns the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mech, e = res.mech, res.estimates
    files: list[Path] = []
    g = len(mech.dof)
    has_band = np.isfinite(e.std).any()
    for d, j in enumerate(mech.dof):
        name = mech.joint_names[j]
        fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
        series = [(e.q[:, j], None if comparison is None else comparison.truth_q[:, j], e.std[:, d]),
                  (e.v[:, j], None if comparison is None else comparison.truth_v[:, j], e.std[:, g + d]),
                  (e.a[:, j], None if comparison is None or comparison.truth_a is None
                   else comparison.truth_a[:, j], None)]
        for ax, (est, tru, std), label, unit in zip(axes, series, ("position", "velocity", "acceleration"),
                                                   _units(mech, j)):
            _shade_skip(ax, res, comparison)
            if std is not None and has_band:
                ax.fill_between(e.t, est - 3 * std, est + 3 * std, color=BAND, alpha=0.25, lw=0,
                                label="estimate +-3 sigma")
            if tru is not None:
                ax.plot(e.t, tru, color=TRUTH, lw=1.0, label="truth")
            ax.plot(e.t, est, color=EST, lw=0.8, label="estimate")
            ax.set_ylabel(f"{label} [{unit}]")
            ax.grid(alpha=0.3)
        axes[0].set_title(f"{mech.config.name}: DOF {name}" + ("" if has_band else " (no covariance band)"))
        axes[0].legend(loc="upper right", fontsize=8)
        axes[-1].set_xlabel("time [s]")
        _save(fig, out / f"dof_{name}.png", files)

    fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
    for ax, (key, label) in zip(axes, (("q", "position"), ("v", "velocity"), ("a", "acceleration"))):
        est = getattr(e, key)
        tru = None
        if comparison is not None:
            tru = {"q": comparison.truth_q, "v": comparison.truth_v, "a": comparison.truth_a}[key]
        for j, name in enumerate(mech.joint_names):
            line, = ax.plot(e.t, est[:, j], lw=0.8, label=name)
            if tru is not None:
                ax.plot(e.t, tru[:, j], lw=0.8, ls="--", color=line.get_color())
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_title(f"{mech.config.name}: joint estimates" + (" (dashed: truth)" if comparison else ""))
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("time [s]")
    _save(fig, out / "joints.png", files)

    if comparison is not None:
        fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
        dof_col = {int(j): d for d, j in enumerate(mech.dof)}
        errs = (comparison.error_q, comparison.error_v, comparison.error_a)
        for row, (ax, err, label) in enumerate(zip(axes, errs, ("position", "velocity", "acceleration"))):
            _shade_skip(ax, res, comparison)
            if err is None:
                ax.text(0.5, 0.5, "no acceleration truth", transform=ax.transAxes, ha="center")
                continue
            for j, name in enumerate(mech.joint_names):
                line, = ax.plot(e.t, err[:, j], lw=0.8, label=name)
                if row < 2 and j in dof_col and has_band:
                    s = e.std[:, dof_col[j] + row * g]
                    ax.fill_between(e.t, -3 * s, 3 * s, color=line.get_color(), alpha=0.15, lw=0)
            ax.set_ylabel(f"{label} error")
            ax.grid(alpha=0.3)
            used = comparison.used
            if used.any():
                lim = np.nanpercentile(np.abs(err[used]), 99.5) * 1.5
                if np.isfinite(lim) and lim > 0:
                    ax.set_ylim(-lim, lim)
        axes[0].set_title(f"{mech.config.name}: estimate - truth\n(grey: the first {comparison.skip:g} s, "
                          "left out of the RMSE; bands: +-3 sigma of the DOFs)", fontsize=10)
        axes[0].legend(loc="upper right", fontsize=8)
        axes[-1].set_xlabel("time [s]")
        _save(fig, out / "errors.png", files)

    panels = []
    for i, name in enumerate(mech.closure_names):
        keep = (significant_components(comparison, name) if comparison is not None and name in comparison.truth_forces
                else [k for k in range(6) if np.abs(np.hstack([e.closure_force[:, i], e.closure_torque[:, i]])[:, k]).max(initial=0) > 1e-9])
        for k in keep:
            est = e.closure_force[:, i, k] if k < 3 else e.closure_torque[:, i, k - 3]
            tru = comparison.truth_forces[name][:, k] if comparison is not None and name in comparison.truth_forces else None
            panels.append((f"{name} {COMPONENTS[k]} [{'N' if k < 3 else 'N m'}]", est, tru))
    for k, cell in enumerate(mech.load_cells):
        name = cell.config.name
        tru = comparison.truth_forces[name][:, 0] if comparison is not None and name in comparison.truth_forces else None
        panels.append((f"load cell {name} [{load_cell_unit(mech, k)}]", e.load_cells[:, k], tru))
    if panels:
        cols = 2 if comparison is not None else 1
        fig, axes = plt.subplots(len(panels), cols, figsize=(8 if cols == 1 else 11, 2.0 * len(panels) + 0.6),
                                 sharex=True, squeeze=False, gridspec_kw={"width_ratios": [3, 2][:cols]})
        for row, (label, est, tru) in enumerate(panels):
            ax = axes[row, 0]
            _shade_skip(ax, res, comparison)
            if tru is not None:
                ax.plot(e.t, tru, color=TRUTH, lw=1.0, label="truth")
            ax.plot(e.t, est, color=EST, lw=0.8, label="estimate")
            ax.set_ylabel(label, fontsize=8)
            ax.grid(alpha=0.3)
            if cols == 2:
                ex = axes[row, 1]
                _shade_skip(ex, res, comparison)
                if tru is not None:
                    err = est - tru
                    ex.plot(e.t, err, color="tab:red", lw=0.8)
                    used = comparison.used & np.isfinite(err)
                    if used.any():
                        lim = np.percentile(np.abs(err[used]), 99.5) * 1.5
                        if np.isfinite(lim) and lim > 0:
                            ex.set_ylim(-lim, lim)
                ex.grid(alpha=0.3)
        axes[0, 0].set_title(f"{mech.config.name}: forces (closures in their frame_b)", fontsize=10)
        axes[0, 0].legend(loc="upper right", fontsize=8)
        if cols == 2:
            axes[0, 1].set_title("estimate - truth", fontsize=10)
            axes[-1, 1].set_xlabel("time [s]")
        axes[-1, 0].set_xlabel("time [s]")
        _save(fig, out / "forces.png", files)

    actuated = [j for j, name in enumerate(mech.joint_names)
                if name in set(mech.input_joints) | set(mech.known_input_joints)]
    if actuated:
        fig, axes = plt.subplots(len(actuated), 1, figsize=(8, 2.2 * len(actuated) + 0.6), sharex=True, squeeze=False)
        for ax, j in zip(axes[:, 0], actuated):
            _shade_skip(ax, res, comparison)
            if comparison is not None:
                ax.plot(e.t, comparison.truth_effort[:, j], color=TRUTH, lw=1.0, label="truth")
            ax.plot(e.t, e.effort[:, j], color=EST, lw=0.8, label="estimate")
            kind = "unknown (estimated)" if mech.joint_names[j] in mech.input_joints else "known"
            ax.set_ylabel(f"{mech.joint_names[j]} [{'N m' if mech.angular[j] else 'N'}]", fontsize=8)
            ax.set_title(f"actuator effort, {kind} input", fontsize=9)
            ax.grid(alpha=0.3)
        axes[0, 0].legend(loc="upper right", fontsize=8)
        axes[-1, 0].set_xlabel("time [s]")
        _save(fig, out / "efforts.png", files)

    rs = [r for r in residuals.values() if r.t.size]
    if rs:
        rows = sum(r.r.shape[1] for r in rs)
        fig, axes = plt.subplots(rows, 2, figsize=(9, 2.0 * rows + 0.6), squeeze=False,
                                 gridspec_kw={"width_ratios": [4, 1]})
        i = 0
        grid = np.linspace(-5, 5, 201)
        for r in rs:
            for c, axis in enumerate(r.axes):
                z = r.r[:, c] / r.sigma
                ax, hx = axes[i]
                ax.plot(r.t, z, ".", ms=1.0, color=EST)
                ax.axhline(3, color="tab:red", lw=0.8)
                ax.axhline(-3, color="tab:red", lw=0.8)
                ax.set_ylabel(f"{r.sensor} {axis}\n[sigma = {r.sigma:.3g} {r.unit}]", fontsize=8)
                ax.grid(alpha=0.3)
                zc = np.clip(z, -6, 6)
                hx.hist(zc, bins=60, range=(-6, 6), density=True, orientation="horizontal", color=EST, alpha=0.6)
                hx.plot(np.exp(-0.5 * grid ** 2) / np.sqrt(2 * np.pi), grid, color=TRUTH, lw=0.8)
                hx.set_yticks([])
                i += 1
        axes[0, 0].set_title(f"{mech.config.name}: residuals (measured - predicted at the estimate) in noise sigmas")
        axes[-1, 0].set_xlabel("time [s]")
        _save(fig, out / "residuals.png", files)
    return files
