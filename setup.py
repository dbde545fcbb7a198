"""ament_python package of mbfg_ros (also installs with plain pip)."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "mbfg_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={f"{PACKAGE}.benchmark": ["rigs/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml", "LICENSE"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.rviz")),
        (f"share/{PACKAGE}/config/iftomm", glob("config/iftomm/*.yaml")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*.urdf")),
        (f"share/{PACKAGE}/urdf/iftomm", glob("urdf/iftomm/*.urdf")),
    ],
    install_requires=["setuptools"],
    # colcon test runs pytest (instead of unittest, which finds nothing here) when the package
    # declares it as its test extra
    extras_require={"test": ["pytest"]},
    zip_safe=True,
    maintainer="mbfg_ros maintainers",
    maintainer_email="mbfg_ros@example.com",
    description="Multibody factor-graph state and force estimation for mechanisms, as a ROS 2 node",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    entry_points={
        "console_scripts": [
            "mbfg = mbfg_ros.cli.main:main",
            "estimator = mbfg_ros.ros.estimator_node:main",
            "estimator_lifecycle = mbfg_ros.ros.lifecycle_node:main",
            "sim_rig = mbfg_ros.ros.sim_rig_node:main",
        ],
    },
)
