"""mbfg_ros: online multibody factor-graph estimation of mechanisms' state and forces."""

__version__ = "0.1.0"
