"""The package as a ROS maintainer and colcon see it: package.xml keys, LICENSE, the test extra,
nothing stray at the root, and data files found from an installed tree."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parent.parent

# the rosdep key (or ROS package) of every module the code imports outside the standard library
ROSDEP_KEYS = {
    "rclpy": "rclpy", "rcl_interfaces": "rcl_interfaces", "ament_index_python": "ament_index_python",
    "builtin_interfaces": "builtin_interfaces", "std_msgs": "std_msgs", "sensor_msgs": "sensor_msgs",
    "geometry_msgs": "geometry_msgs", "control_msgs": "control_msgs",
    "diagnostic_msgs": "diagnostic_msgs", "std_srvs": "std_srvs", "rosgraph_msgs": "rosgraph_msgs",
    "tf2_msgs": "tf2_msgs", "tf2_ros": "tf2_ros_py", "launch": "launch", "launch_ros": "launch_ros",
    "pinocchio": "pinocchio", "numpy": "python3-numpy", "scipy": "python3-scipy",
    "yaml": "python3-yaml", "matplotlib": "python3-matplotlib", "rosbags": "python3-rosbags-pip",
    "filterpy": "python3-filterpy-pip", "tqdm": "python3-tqdm",
    "pytest": "python3-pytest",        # mbfg_ros.testing: the HIL fixtures for rig owners' tests
}
# GTSAM's Python bindings, CasADi and the mcap library (with its chunk compressions): pip
# (README, package.xml description); MuJoCo: pip, imported only by the independent-engine
# recordings of the tests and tools (sim/mujoco_rigs.py), never by the estimator or the node
NO_ROSDEP_KEY = {"gtsam", "casadi", "mcap", "lz4", "zstandard", "mujoco"}


def _package():
    return parse_package(str(ROOT / "package.xml"))


def _imported_modules() -> set[str]:
    out: set[str] = set()
    files = list((ROOT / "mbfg_ros").rglob("*.py")) + list((ROOT / "launch").glob("*.py"))
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names and m != "mbfg_ros"}


def test_package_xml_is_valid_format_3_with_run_dependencies_only():
    pkg = _package()
    pkg.validate()
    assert pkg.package_format == 3 and pkg.name == "mbfg_ros"
    # ament_python compiles nothing: no <depend>, <build_depend> or <build_export_depend>
    assert not pkg.build_depends and not pkg.build_export_depends
    assert [lic for lic in pkg.licenses] == ["BSD-3-Clause"]
    assert pkg.exports[0].tagname == "build_type" and pkg.exports[0].content == "ament_python"


def test_every_imported_module_has_its_key_in_package_xml():
    pkg = _package()
    keys = {d.name for d in pkg.exec_depends + pkg.test_depends}
    modules = _imported_modules()
    unknown = modules - set(ROSDEP_KEYS) - NO_ROSDEP_KEY
    assert not unknown, f"imported but not mapped to a rosdep key here: {sorted(unknown)}"
    missing = {m: ROSDEP_KEYS[m] for m in modules - NO_ROSDEP_KEY if ROSDEP_KEYS[m] not in keys}
    assert not missing, f"imported modules whose key package.xml lacks: {missing}"
    assert "gtsam" in _package().description      # the one pip-only dependency is named there


def test_every_ros_message_type_used_is_a_declared_dependency():
    keys = {d.name for d in _package().exec_depends}
    used = set()
    for path in (ROOT / "mbfg_ros").rglob("*.py"):
        used.update(m.group(1) for m in re.finditer(r"\"(\w+)/(?:msg|srv)/\w+\"",
                                                      path.read_text(encoding="utf-8")))
    assert used and used <= keys, sorted(used - keys)


def test_license_file_is_the_declared_bsd_3_clause():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD 3-Clause License")
    assert text.count("\n\n1. ") == 1 and "\n\n3. Neither the name" in text


def test_colcon_test_runs_pytest_the_test_extra():
    """colcon runs pytest (not unittest, which collects nothing here) when setup.py names it in
    extras_require['test']."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    extras = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg == "extras_require"}
    assert "pytest" in extras["extras_require"]["test"]


def test_no_third_party_archives_in_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    assert not [f for f in files if f.endswith((".whl", ".tar.gz", ".zip", ".egg"))]


@pytest.mark.slow
def test_an_installed_tree_finds_its_config_in_the_share_directory(tmp_path):
    """A real (non-editable) install into a prefix: the package's wheel, unpacked as an install
    does (data files under <prefix>/share), without touching this environment; the benchmark's
    configs then come from <prefix>/share/mbfg_ros/config through the ament index, not from
    site-packages/config."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"), str(ROOT)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("mbfg_ros-*.whl")
    prefix = tmp_path / "install"
    site = prefix / "lib" / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if ".data/data/" in name:            # data_files: relative to the prefix
                target = prefix / name.split(".data/data/", 1)[1]
            elif ".data/" in name or ".dist-info/" in name:
                continue
            else:
                target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
    env = dict(os.environ, PYTHONPATH=str(site), AMENT_PREFIX_PATH=str(prefix))
    probe = ("import mbfg_ros, mbfg_ros.benchmark.grid as g, mbfg_ros.benchmark.perf as p, "
             "mbfg_ros.ros.launch_description as l\n"
             "print(mbfg_ros.__file__); print(g.DEFAULT_CONFIG_DIR); print(l.default_config())\n"
             "mech, _ = p._case('four_bar'); print(mech.config.name)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    module, config_dir, default_config, name = out.stdout.split()
    share = prefix / "share" / "mbfg_ros"
    assert Path(module).is_relative_to(site)
    assert Path(config_dir) == share / "config" and (share / "config" / "four_bar.yaml").is_file()
    assert Path(default_config) == share / "config" / "four_bar.yaml"
    assert name == "four_bar" and (share / "LICENSE").is_file()
