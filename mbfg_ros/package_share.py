"""Where the package's data files are: ``config/``, ``urdf/``, ``launch/`` (no ROS needed).

From the source tree (the pip environment's editable install, ``colcon build --symlink-install``)
they are beside the ``mbfg_ros`` Python package; in an installed tree (``colcon build``, a wheel)
they are in the package's share directory, ``<prefix>/share/mbfg_ros``, found through the ament
index (``AMENT_PREFIX_PATH``, set by ``install/setup.bash``) or else under this interpreter's
prefix (a plain ``pip install``).
"""
from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = "mbfg_ros"


def share_dir() -> Path:
    """The directory holding ``config/``, ``urdf/`` and ``launch/`` (see the module docstring)."""
    source = Path(__file__).resolve().parents[1]
    if (source / "package.xml").is_file() and (source / "config").is_dir():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError, OSError, ValueError):
        pass
    installed = Path(sys.prefix) / "share" / PACKAGE
    return installed if (installed / "config").is_dir() else source


def config_dir() -> Path:
    """The example rigs' configs (``config/*.yaml``)."""
    return share_dir() / "config"
