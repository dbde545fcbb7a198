"""The Kalman-filter observers of the observer benchmark (Sanjurjo et al.), on the mechanism model.

Every observer works in the independent coordinates z = q[mech.dof] of the DOF, as in the paper,
through :class:`~mbfg_ros.benchmark.observers.independent_model.IndependentModel`.
"""
