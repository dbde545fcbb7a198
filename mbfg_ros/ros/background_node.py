"""A node spun in a background thread on its own rclpy context and DDS domain: what the demo's
monitor, the soak's watcher and the tests' recorders listen with while their process goes on."""
from __future__ import annotations

import threading
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


class BackgroundNode:
    """``node`` (made by ``make_node(context)``, or a plain node named ``name``) on domain
    ``domain_id``; create its subscriptions, then :meth:`start` spins it in a daemon thread;
    :meth:`close` stops and destroys everything."""

    def __init__(self, domain_id: int, name: str = "mbfg_listener",
                 make_node: Callable[[rclpy.Context], Node] | None = None) -> None:
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, domain_id=int(domain_id))
        self.node = (make_node(self.context) if make_node is not None
                     else rclpy.create_node(name, context=self.context, enable_rosout=False))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=self.node.get_name(), daemon=True)

    def start(self) -> "BackgroundNode":
        self._thread.start()
        return self

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except (ExternalShutdownException, KeyboardInterrupt):
            pass
        except Exception:            # noqa: BLE001 (shut down under the spin)
            pass

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
