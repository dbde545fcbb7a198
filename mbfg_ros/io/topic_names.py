"""ROS topic names as ROS resolves them (no ROS needed).

The mechanism config's topics are relative by default (``encoders``): a node resolves them in
its namespace (``/rig1/encoders`` with ``namespace:=rig1``), so one namespace moves a rig and its
estimator together; absolute names (``/encoders``) stay where they are. What has no namespace of
its own (a bag written by ``mbfg simulate``, the bag ``mbfg replay`` reads) resolves them at the
root: ``/encoders``.
"""
from __future__ import annotations


def resolve_topic(name: str, namespace: str = "/") -> str:
    """``name`` resolved in ``namespace``: absolute names unchanged, relative ones joined to the
    namespace (``resolve_topic("encoders", "rig1")`` is ``/rig1/encoders``)."""
    if name.startswith("/"):
        return name
    ns = namespace.strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"
