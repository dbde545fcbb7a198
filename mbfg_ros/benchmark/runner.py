"""One benchmark run (a cell and a seed: every method on the same samples), and the grid of them.

A run: the truth is simulated once per process and sensor set with ``mbfg_ros.sim.simulate``
(deterministic: released from rest at the config's pose + the initial error, g = 9.81 m/s^2);
the cell's readings are synthesized from it with ``SensorOptions(rates=..., seed=seed)`` (the
seed draws the sensor noise); every selected method runs over the same samples with the cell's
wrong model; each is compared with the truth at every step (:mod:`mbfg_ros.benchmark.metrics`).

The grid runs (cell, seed) tasks in parallel worker processes (``jobs``; each worker builds its
own mechanisms and caches its truths) and appends each finished task as one JSON line to a
results file, so a long run can be inspected while it goes and resumed after an interruption.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable

from mbfg_ros.benchmark.estimator_tuning import dynamics_noise
from mbfg_ros.benchmark.grid import (Cell, GridOptions, benchmark_config, observer_mechanism,
                                     sensor_rate, truth_config)
from mbfg_ros.benchmark.methods import METHODS, RunData, readings_by_step, run_group
from mbfg_ros.benchmark.metrics import Truth, evaluate, failure
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.forward import Trajectory, simulate
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize

_truths: dict[tuple, tuple[Trajectory, Truth]] = {}


def simulated_truth(options: GridOptions, cell: Cell) -> tuple[Trajectory, Truth]:
    """The truth of the cell's rig (cached per process: it depends only on the mechanism, the
    sensor set's config, the duration and the initial error)."""
    key = (str(options.config_dir), cell.mechanism, cell.sensors, options.duration,
           options.initial_error, options.dt)
    if key not in _truths:
        config = truth_config(benchmark_config(options, cell))
        scenario = Scenario(duration=options.duration, initial_dof_offset=options.initial_error)
        traj = simulate(Mechanism(config), scenario)
        gt = ground_truth(traj, rate=1.0 / options.dt)
        if gt.t.size != options.steps:
            raise RuntimeError(f"ground truth has {gt.t.size} steps, expected {options.steps}")
        _truths[key] = (traj, Truth(gt.q, gt.v, gt.a, gt.closure_force))
    return _truths[key]


def run_data(options: GridOptions, cell: Cell, seed: int) -> tuple[RunData, Truth]:
    """The samples and the wrong model of one run, and its truth."""
    traj, truth = simulated_truth(options, cell)
    rate = sensor_rate(options, cell)
    samples = synthesize(traj, SensorOptions(rates={"encoder": rate, "gyro": rate}, seed=seed))
    model = observer_mechanism(benchmark_config(options, cell), cell.gravity_error)
    steps = options.steps
    noise = options.dynamics_noise or dynamics_noise(cell.mechanism, cell.sensors, False)
    noise_g = options.dynamics_noise_g or dynamics_noise(cell.mechanism, cell.sensors, True)
    return RunData(model, samples, readings_by_step(samples, steps, options.dt), steps, options.dt,
                   noise, noise_g, (cell.mechanism, cell.sensors)), truth


def run_one(options: GridOptions, cell: Cell, seed: int, methods: Iterable[str]) -> dict:
    """Every method of ``methods`` on one run; a JSON-able record:
    {cell, seed, wall, samples, methods: {key: metrics + info}}."""
    t0 = time.perf_counter()
    data, truth = run_data(options, cell, seed)
    methods = list(methods)
    groups = list(dict.fromkeys(METHODS[m].group for m in methods))
    out: dict[str, dict] = {}
    for group in groups:
        try:
            tracks = run_group(group, data)
        except Exception as exc:           # a method that breaks is a failed method, not a crash
            reason = f"exception: {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
            for m in methods:
                if METHODS[m].group == group:
                    out[m] = {**failure(reason).as_dict(), "info": {}}
            continue
        for m, track in tracks.items():
            if m in methods:
                metrics = evaluate(data.model, track, truth, options.fail_threshold)
                out[m] = {**metrics.as_dict(), "info": track.info}
    return {"cell": asdict(cell), "key": cell.key, "seed": seed, "samples": len(data.samples),
            "wall": time.perf_counter() - t0, "methods": {m: out[m] for m in methods if m in out}}


def _work(task: tuple[GridOptions, Cell, int, tuple[str, ...]]) -> dict:
    options, cell, seed, methods = task
    return run_one(options, cell, seed, methods)


def tasks(options: GridOptions) -> list[tuple[Cell, int]]:
    """(cell, seed) pairs, seed by seed (a grid stopped early holds whole grids of fewer seeds)."""
    return [(cell, seed) for seed in options.seeds for cell in options.cells()]


def load_records(path: Path) -> list[dict]:
    """The records of a results file (JSON lines); a torn last line is ignored."""
    out = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def run_grid(options: GridOptions, *, jobs: int = 1, results: Path | None = None,
             resume: bool = False, progress: bool = True,
             on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """Run every (cell, seed) of ``options`` with ``options.methods``; returns the records.

    ``results``: a JSON-lines file each finished run is appended to. With ``resume`` its runs
    are kept and only what is missing runs (new cells or seeds, or methods a run lacks, whose
    figures are merged into it); otherwise the file is started afresh.
    """
    from tqdm import tqdm

    methods = tuple(options.methods)
    previous: dict[tuple[str, int], dict] = {}
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        if resume:
            for r in load_records(results):
                key = (r["key"], r["seed"])
                if key in previous:                      # merge partial records of one run
                    previous[key]["methods"].update(r["methods"])
                else:
                    previous[key] = r
    wanted = tasks(options)
    records: list[dict] = []
    todo = []
    partial: dict[tuple[str, int], dict] = {}
    for c, s in wanted:
        old = previous.get((c.key, s))
        missing = tuple(m for m in methods if old is None or m not in old["methods"])
        if not missing:
            records.append({**old, "methods": {m: old["methods"][m] for m in methods}})
        else:
            todo.append((options, c, s, missing))
            if old is not None:
                partial[(c.key, s)] = old
    if results is not None:                  # keep every previous run as it was, in full
        results.write_text("".join(json.dumps(r) + "\n" for r in previous.values()))
    bar = tqdm(total=len(wanted), initial=len(records), desc="benchmark runs", unit="run",
               file=sys.stderr, disable=not progress, dynamic_ncols=True)

    def finished(rec: dict) -> None:
        old = partial.get((rec["key"], rec["seed"]))
        if old is not None:                              # methods added to a finished run
            rec = {**old, "methods": {**old["methods"], **rec["methods"]}}
        if results is not None:
            with results.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
        rec = {**rec, "methods": {m: rec["methods"][m] for m in methods if m in rec["methods"]}}
        records.append(rec)
        if on_record is not None:
            on_record(rec)
        bar.set_postfix_str(f"{rec['key']} seed {rec['seed']}", refresh=False)
        bar.update(1)

    try:
        if jobs <= 1 or len(todo) <= 1:
            for task in todo:
                finished(_work(task))
        else:
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(var, "1")      # one core per worker (inherited at spawn)
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(processes=min(jobs, len(todo))) as pool:
                for rec in pool.imap_unordered(_work, todo, chunksize=1):
                    finished(rec)
    finally:
        bar.close()
    return records
