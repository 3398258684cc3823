"""The fixed files of a build context: the verify/apply shell script run by each RUN step.

The script is constant text; every value reaches it as an argv element of an exec-form RUN
(JSON-quoted in the Dockerfile), never spliced into shell text.
"""

from __future__ import annotations

from pathlib import Path

WORKDIR = "/tmp/inkctl-build"

VERIFY_SH = r"""#!/bin/sh
# inkctl build: verify a file's sha256, apply ONE patch, verify the result (fail-closed).
#   verify.sh N replace PATH BEFORE AFTER SOURCE
#   verify.sh N edit    PATH BEFORE AFTER EDITS.json
#   verify.sh N diff    ROOT DIFF PATH BEFORE AFTER [PATH BEFORE AFTER ...]
# BEFORE 'absent' means the file must not exist yet; AFTER 'absent' that the patch deletes it.
set -eu
D=$(dirname "$0")
N=$1; KIND=$2; shift 2
say() { echo "inkctl-build: patch $N ($KIND): $*" >&2; }
hash_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"
  else say "$1: the base image has neither sha256sum nor python3: cannot verify"; exit 1; fi
}
check() {  # check WHEN PATH EXPECTED
  if [ "$3" = absent ]; then
    if [ -e "$2" ]; then say "$2: expected no such file $1 patching, but it exists"; exit 1; fi
    return 0
  fi
  if [ ! -f "$2" ]; then say "$2: no such file in the image $1 patching (expected sha256 $3)"; exit 1; fi
  actual=$(hash_of "$2")
  if [ "$actual" != "$3" ]; then say "$2: sha256 mismatch $1 patching: expected $3, actual $actual"; exit 1; fi
}
python() {
  command -v python3 >/dev/null 2>&1 || { say "$1: the base image has no python3 to apply this patch"; exit 1; }
  python3 "$D/patch_apply.py" "$@" || { say "$2: not applied"; exit 1; }
}
case $KIND in
  replace) check before "$1" "$2"; cp "$4" "$1"; check after "$1" "$3" ;;
  edit) check before "$1" "$2"; python edit "$1" "$4"; check after "$1" "$3" ;;
  diff)
    ROOT=$1; DIFF=$2; shift 2
    each() {  # each before|after PATH BEFORE AFTER ...
      when=$1; shift
      while [ $# -ge 3 ]; do
        if [ "$when" = before ]; then check before "$1" "$2"; else check after "$1" "$3"; fi
        shift 3
      done
    }
    each before "$@"
    if patch --version 2>/dev/null | grep -q 'GNU patch'; then
      patch -p1 --batch --forward --fuzz=0 --no-backup-if-mismatch -r - -d "$ROOT" -i "$DIFF" >&2 \
        || { say "$ROOT: patch -p1 failed (see its output above)"; exit 1; }
    else
      python diff "$ROOT" "$DIFF"
    fi
    each after "$@" ;;
  *) say "unknown patch kind"; exit 2 ;;
esac
echo "inkctl-build: patch $N ($KIND) verified" >&2
"""


def applier_source() -> bytes:
    """The standalone Python applier, shipped verbatim (it is also what ``lock`` runs locally)."""
    return (Path(__file__).with_name("patch_apply.py")).read_bytes()
