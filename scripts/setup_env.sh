#!/usr/bin/env bash
# Creates .venv with every dependency of mbfg_ros, builds tf2_msgs from its definition and
# installs the package in editable mode (so .venv/bin/mbfg is the CLI). Idempotent: when
# nothing it depends on changed since the last successful run it returns at once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.mbfg-setup-stamp"
cd "$ROOT"

inputs=(requirements.txt scripts/setup_env.sh setup.py setup.cfg package.xml
        tools/tf2_msgs/package.xml tools/tf2_msgs/CMakeLists.txt tools/tf2_msgs/msg/TFMessage.msg)
want="$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/mbfg" ]]; then
  exit 0
fi

echo "[setup] creating the environment in $VENV (first run takes about 2 minutes)"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt

echo "[setup] building tf2_msgs from its definition"
# The ROS wheels' CMake exports hard-code the wheel builder's interpreter paths: point them here.
pyinc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
npinc="$("$PY" -c 'import numpy; print(numpy.get_include())')"
grep -rl --include='*.cmake' '/opt/python/cp3' "$VENV/share" 2>/dev/null | while read -r f; do
  sed -i -E "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#${pyinc}#g; s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#${npinc}#g" "$f"
done
build="$ROOT/build/tf2_msgs"
mkdir -p "$ROOT/build"
rm -rf "$build"
(
  export CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
  cmake -S tools/tf2_msgs -B "$build" -DCMAKE_INSTALL_PREFIX="$VENV" \
        -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF >"$build.log" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" >>"$build.log" 2>&1 &&
  cmake --install "$build" >>"$build.log" 2>&1
) || { echo "[setup] tf2_msgs build failed; the log is $build.log" >&2; tail -30 "$build.log" >&2; exit 1; }
"$PY" -c 'from tf2_msgs.msg import TFMessage' || { echo "[setup] tf2_msgs does not import" >&2; exit 1; }

echo "[setup] installing mbfg_ros (editable)"
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
echo "$want" > "$STAMP"
echo "[setup] done: $VENV/bin/mbfg"
