# mbfg_ros: the two commands of the README work on a fresh machine (they set up .venv first).
#   make demo   - the four-bar rig and the estimator live over DDS, with figures and plots
#   make test   - the whole test suite (what CI runs)
# Long runs have their own targets: make bench-quick, make bench-perf, make bench-node,
# make bench-against REF=<commit> (the speed guard), make bench-full,
# make soak.
#
# ROS_DISTRO picks the ROS 2 distribution of the pip environment, on the command line only (a
# sourced ROS setup.bash exports ROS_DISTRO for its own install, not for this venv):
#   kilted (the default) - .venv from requirements-kilted.txt; make test runs the whole suite
#   jazzy                - .venv-jazzy from requirements-jazzy.txt; make test ROS_DISTRO=jazzy runs
#                          the ROS-facing tests only: marker `distro` (pytest.ini), which every
#                          test under test/ros carries (test/conftest.py) and a few others
#                          (the replay's output bag read by rclpy, the control_msgs built from tools/)
# Every other target runs in the chosen venv too (make demo ROS_DISTRO=jazzy).

ifneq ($(origin ROS_DISTRO),command line)
ROS_DISTRO := kilted
endif
ifeq ($(ROS_DISTRO),kilted)
VENV   := .venv
TESTS  :=
else
VENV   := .venv-$(ROS_DISTRO)
TESTS  := distro
endif
PY     := $(VENV)/bin/python
MBFG   := $(VENV)/bin/mbfg
export ROS_LOG_DIR ?= $(CURDIR)/build/ros_log
# bytecode under build/pycache, not in the source tree: the node, rig and CLI processes the tests
# start (and pytest's collection) then load mbfg_ros compiled instead of compiling it each time
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/build/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test test-fast demo check-examples bench-quick bench-perf bench-node bench-against bench-full soak clean

setup:
	@scripts/setup_env.sh $(ROS_DISTRO)

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
test: setup
	@$(PY) -m pytest $(if $(TESTS),-m "$(TESTS)"); rc=$$?; if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

test-fast: setup
	@$(PY) -m pytest -m "$(if $(TESTS),$(TESTS) and )not slow"; rc=$$?; if [ $$rc -eq 5 ]; then echo "make test-fast: no tests were collected" >&2; exit 1; fi; exit $$rc

demo: setup
	@$(MBFG) demo

check-examples: setup
	@for f in config/*.yaml config/iftomm/*.yaml; do case $$f in *.params.yaml|*.map.yaml) continue;; esac; $(MBFG) check $$f || exit 1; done

bench-quick: setup
	@$(MBFG) benchmark --quick --jobs 2

bench-perf: setup
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	@$(MBFG) benchmark --perf

# the live node against its estimator over DDS (mbfg benchmark --node): node CPU, overhead, latency;
# the panda case needs requirements-bench.txt; figures in build/bench_node/results.json
bench-node: setup
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt
	@$(MBFG) benchmark --node --out build/bench_node --json build/bench_node/results.json

# the speed guard: this tree's estimator against REF's, side by side (tools/perf_against.py)
REF ?= HEAD
bench-against: setup
	@$(PY) tools/perf_against.py $(REF)

# what docs/benchmark holds: 20 seeds, 4..23 (seeds 0..3 and 100..107 were looked at while choosing
# settings), the filters, the batch reference, the rig's one default configuration and the old default
bench-full: setup
	@$(MBFG) benchmark --full --seeds 20 --first-seed 4 --jobs 2 --out docs/benchmark \
		--methods dekf,ukf,error_ekf,diekf_pm,cekf,batch,mbfg_default,mbfg_default_lagged,mbfg_online,mbfg_lagged

# rig + estimator live over DDS for SOAK_MINUTES: memory slopes and every reading accounted for
SOAK_MINUTES ?= 30
soak: setup
	@$(PY) -m mbfg_ros.testing.soak --minutes $(SOAK_MINUTES) --out build/soak

clean:
	rm -rf build .venv .venv-* .pytest_cache
