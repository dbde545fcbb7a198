"""Test helpers for rig owners: HIL runs of the simulated rig and the estimator over real DDS.

- :class:`mbfg_ros.testing.hil.HilRun`: start, wait, compare, stop (see its module docstring);
- :mod:`mbfg_ros.testing.fixtures`: pytest fixtures (``hil_run``) to import in a conftest.py.

README "Writing a HIL test for your rig" walks through a complete test.
"""
from mbfg_ros.testing.hil import HilError, HilRun, start_estimator_expecting_failure

__all__ = ["HilRun", "HilError", "start_estimator_expecting_failure"]
