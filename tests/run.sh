#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (root): installs what the tests need
# (inkctl and pytest/hypothesis/mypy/ruff into .venv via bootstrap.sh; sshd, dockerd, podman,
# debootstrap, tmux with apt), runs ruff and mypy, unit tests and
# the end-to-end tests on a simulated cluster (network namespaces, each with sshd and its
# own container engine), and tears the cluster down again, also after a failure.
#
#   bash tests/run.sh              # everything
#   bash tests/run.sh -m 'not cluster'   # unit tests only (no root needed)
set -euo pipefail
cd "$(dirname "$0")/.."

# every test runs in .venv's Python (the e2e tests start `sys.executable -m inkctl`); an install
# failure stops here with pip's own message
sh bootstrap.sh --test
py=.venv/bin/python

# the checks first (seconds, no root): types (mypy, settings in pyproject.toml) and lint (ruff)
.venv/bin/ruff check inkctl tests benchmarks
.venv/bin/mypy

cluster=1
for a in "$@"; do [[ "$a" == "not cluster" ]] && cluster=0; done
if [[ $cluster == 1 ]]; then
  if [[ $(id -u) != 0 ]]; then echo "tests/run.sh: the cluster tests need root (network namespaces, dockerd)" >&2; exit 2; fi
  bash tests/cluster/install.sh
  trap '"$py" -m tests.cluster down >/dev/null 2>&1 || true' EXIT
fi

"$py" -m pytest -q -p no:cacheprovider "$@"
