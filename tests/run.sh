#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (root): installs what the tests need
# (the package, pytest/hypothesis, sshd, dockerd, podman, debootstrap), runs unit tests and
# the end-to-end tests on a simulated cluster (network namespaces, each with sshd and its
# own container engine), and tears the cluster down again, also after a failure.
#
#   bash tests/run.sh              # everything
#   bash tests/run.sh -m 'not cluster'   # unit tests only (no root needed)
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q -e '.[test]' 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'is ignored' || true

cluster=1
for a in "$@"; do [[ "$a" == "not cluster" ]] && cluster=0; done
if [[ $cluster == 1 ]]; then
  if [[ $(id -u) != 0 ]]; then echo "tests/run.sh: the cluster tests need root (network namespaces, dockerd)" >&2; exit 2; fi
  bash tests/cluster/install.sh
  trap 'python3 -m tests.cluster down >/dev/null 2>&1 || true' EXIT
fi

python3 -m pytest -q -p no:cacheprovider "$@"
