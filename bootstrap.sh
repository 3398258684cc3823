#!/bin/sh
# Install inkctl from this checkout into .venv/ (a virtual environment: stock Debian 12 and
# Ubuntu 24.04 have no pip and refuse `pip install` into the system Python, PEP 668).
#
#   sh bootstrap.sh          # inkctl; then .venv/bin/inkctl ...
#   sh bootstrap.sh --test   # inkctl and what the tests need (pytest, hypothesis, ...)
#
# Needs python3 (>= 3.10) and its venv module (Debian/Ubuntu package python3-venv: installed
# with apt when run as root, else the exact command is printed). Any failure stops it, loudly.
set -eu
cd "$(dirname "$0")"

extras=""
case "${1:-}" in
    "") ;;
    --test) extras="[test]" ;;
    *) echo "usage: sh bootstrap.sh [--test]" >&2; exit 2 ;;
esac

if ! command -v python3 >/dev/null 2>&1; then
    echo "bootstrap.sh: python3 is missing; install it first: apt-get install python3" >&2
    exit 1
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "bootstrap.sh: inkctl needs Python >= 3.10, this is $(python3 -V 2>&1)" >&2
    exit 1
fi

# python3 -m venv needs ensurepip, which Debian and Ubuntu ship apart as python3-venv
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    pkg="python3-venv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap.sh: installing $pkg (python3 -m venv needs it)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
    else
        echo "bootstrap.sh: python3 cannot create a virtual environment here; install $pkg first:" >&2
        echo "    sudo apt-get install -y $pkg" >&2
        exit 1
    fi
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    rm -rf .venv  # a half-made one (e.g. from before python3-venv was there)
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
echo "bootstrap.sh: inkctl installed in .venv: run .venv/bin/inkctl (or: . .venv/bin/activate)"
