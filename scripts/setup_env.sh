#!/usr/bin/env bash
# Usage: scripts/setup_env.sh [DISTRO]   (DISTRO: kilted, the default, or jazzy)
# Creates the venv of one ROS 2 distribution (.venv for kilted, .venv-<distro> for the others) with
# every dependency of mbfg_ros (requirements-<distro>.txt: the shared non-ROS pins of
# requirements.txt plus that distro's rclpy and messages), builds tf2_msgs and the two control_msgs
# messages the package publishes from their definitions (tools/: neither is on PyPI) with that
# distro's ament, and installs the package in editable mode (so <venv>/bin/mbfg is the CLI).
# Idempotent: when nothing it depends on changed since the last successful run it returns at once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DISTRO="${1:-kilted}"
PYTHON="${PYTHON:-python3}"
cd "$ROOT"
case "$DISTRO" in
  kilted|jazzy) REQUIREMENTS="requirements-$DISTRO.txt" ;;
  *) echo "[setup] ROS_DISTRO '$DISTRO': the pip environment has kilted (the default) and jazzy" >&2; exit 2 ;;
esac
if [[ "$DISTRO" == kilted ]]; then VENV="$ROOT/.venv"; else VENV="$ROOT/.venv-$DISTRO"; fi
STAMP="$VENV/.mbfg-setup-stamp"

inputs=(requirements.txt "$REQUIREMENTS" scripts/setup_env.sh setup.py setup.cfg package.xml
        tools/tf2_msgs/package.xml tools/tf2_msgs/CMakeLists.txt tools/tf2_msgs/msg/TFMessage.msg
        tools/control_msgs/package.xml tools/control_msgs/CMakeLists.txt
        tools/control_msgs/msg/DynamicJointState.msg tools/control_msgs/msg/InterfaceValue.msg)
want="$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/mbfg" ]]; then
  exit 0
fi

echo "[setup] creating the ROS 2 $DISTRO environment in $VENV (first run takes about 2 minutes)"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PY" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"

echo "[setup] building tf2_msgs and control_msgs from their definitions"
# The ROS wheels' CMake exports hard-code the wheel builder's interpreter paths: point them here.
pyinc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
npinc="$("$PY" -c 'import numpy; print(numpy.get_include())')"
# (grep finds nothing once they are rewritten: a re-run in an existing .venv must not stop there)
{ grep -rl --include='*.cmake' '/opt/python/cp3' "$VENV/share" 2>/dev/null || true; } | while read -r f; do
  sed -i -E "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${pyinc}#g; s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#${npinc}#g" "$f"
done
mkdir -p "$ROOT/build/$DISTRO"
for pkg in tf2_msgs control_msgs; do
  build="$ROOT/build/$DISTRO/$pkg"
  rm -rf "$build"
  (
    export CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
    cmake -S "tools/$pkg" -B "$build" -DCMAKE_INSTALL_PREFIX="$VENV" \
          -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF >"$build.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" >>"$build.log" 2>&1 &&
    cmake --install "$build" >>"$build.log" 2>&1
  ) || { echo "[setup] $pkg build failed; the log is $build.log" >&2; tail -30 "$build.log" >&2; exit 1; }
done
"$PY" -c 'from tf2_msgs.msg import TFMessage' || { echo "[setup] tf2_msgs does not import" >&2; exit 1; }
"$PY" -c 'from control_msgs.msg import DynamicJointState' || { echo "[setup] control_msgs does not import" >&2; exit 1; }

echo "[setup] installing mbfg_ros (editable)"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$want" > "$STAMP"
echo "[setup] done: $VENV/bin/mbfg"
