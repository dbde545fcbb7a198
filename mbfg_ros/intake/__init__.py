"""The intake: how readings reach the estimator, one set of rules for the node and ``mbfg replay``.

No ROS imports. A reading's way (after the input router, :mod:`mbfg_ros.io.sensor_inputs`,
decoded it from its message):

1. ``stamp_order``: :class:`~mbfg_ros.intake.stamp_order.StampOrder` holds it while another
   active topic may still send an older one (the per-topic watermark, at most ``reorder_window``
   of the caller's clock: the node's steady clock, the replay's log time);
2. ``feeder``: :class:`~mbfg_ros.intake.feeder.Feeder` sets the epoch, applies the time rules of
   ``time_jumps`` (:class:`~mbfg_ros.intake.time_jumps.TimeJumps`: an out-of-line stamp held,
   then rejected or, confirmed, a jump that resets the estimator), calls ``add_sample`` and counts
   what became of every reading;
3. ``sensor_health``: :class:`~mbfg_ros.intake.sensor_health.SensorHealth` judges each sensor
   over a rolling window from those counts (the node's /diagnostics).
"""
