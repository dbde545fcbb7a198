"""RMSE table of config/fast_crank.yaml replayed with the default estimator settings (issue 12):
three sensor sets, filtered and lagged. Usage (from the repository root):

    .venv/bin/mbfg simulate config/fast_crank.yaml --duration 10 --out /tmp/fc --input sine \
        --input-amplitude 2.5 --input-offset 2.3 --input-frequency 3 --input-start 0 --truth-rate 1000
    .venv/bin/python tools/fast_rig_table.py /tmp/fc
"""
import dataclasses, sys, time
import numpy as np
from mbfg_ros.model.config import SensorsConfig
from mbfg_ros.model.mechanism import Mechanism, load_mechanism
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.session import ReplayOptions, replay_bag

bag = sys.argv[1]
base = load_mechanism("config/fast_crank.yaml")
s = base.config.sensors
sets = {"all": s, "gyro": SensorsConfig(gyros=s.gyros),
        "encoder+load cell": SensorsConfig(encoders=s.encoders, load_cells=s.load_cells)}
print(f"{'sensors':18s} {'output':8s} {'pos mrad':>8s} {'vel rad/s':>9s} {'vel %':>6s} {'acc rad/s2':>10s} {'acc %':>6s} "
      f"{'torque Nm':>9s} {'torq %':>6s} {'pin Fx N':>8s} {'Fx %':>5s} {'pin Fy N':>8s} {'slips':>5s} {'RTF':>5s} {'est RTF':>7s} diverged")
for name, sens in sets.items():
    mech = Mechanism(dataclasses.replace(base.config, sensors=sens))
    j = mech.index["crank_joint"]
    for lagged in (False, True):
        res = replay_bag(bag, mech, ReplayOptions(lagged=lagged, progress=False))
        c = compare(mech, res.estimates, res.truth, skip=1.0)
        u = c.used
        rms = lambda x: float(np.sqrt(np.nanmean(x[u] ** 2)))
        r = c.rmse["crank_joint"]; f = c.rmse_forces["wrist_pin"]
        tw = c.truth_forces["wrist_pin"]
        print(f"{name:18s} {'lagged' if lagged else 'filtered':8s} {r['position']*1e3:8.3f} {r['velocity']:9.4f} "
              f"{100*r['velocity']/rms(c.truth_v[:, j]):6.3f} {r['acceleration']:10.1f} {100*r['acceleration']/rms(c.truth_a[:, j]):6.2f} "
              f"{r['effort']:9.3f} {100*r['effort']/rms(c.truth_effort[:, j]):6.2f} {f['force_x']:8.2f} {100*f['force_x']/rms(tw[:, 0]):5.2f} {f['force_y']:8.2f} "
              f"{c.turn_slips['crank_joint']:5d} {res.realtime_factor:5.2f} {res.estimator_realtime_factor:7.2f} "
              f"{sorted(set(p.sensor for p in res.health.divergence.periods)) or '-'}")
v = c.truth_v[u, j]
print(f"truth: crank speed mean {v.mean():.1f} rad/s, min {v.min():.1f}, max {v.max():.1f}, RMS {rms(c.truth_v[:, j]):.1f}; "
      f"torque RMS {rms(c.truth_effort[:, j]):.2f} N m; pin force_x RMS {rms(tw[:, 0]):.1f} N")
