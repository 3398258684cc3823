"""The shell functions of the Slurm job (``export.slurm``): fixed text, no recipe value in it.

Every value a function uses arrives as an argument quoted by ``plan.quote``; the functions
only check, wait and report. A rank records how it ended in ``$INK_DIR/status/rank<N>``
(``<node> running|failed <reason>|stopped|exited <code>``): ``report_ranks`` in the batch
script and ``inkctl up --slurm`` read it to name the rank and host that failed.
"""

from __future__ import annotations

STATUS_DIR = "status"

RANK_FUNCTIONS = r'''
note() { printf '%s %s\n' "$SLURMD_NODENAME" "$*" > "$INK_DIR/status/rank${INK_RANK:-x}"; }
fail() {
  echo "inkctl: rank ${INK_RANK:-?} on $SLURMD_NODENAME: $*" >&2
  note "failed $*"
  remove_container
  exit 3
}
remove_container() { [ -z "${INK_RM+x}" ] || "${INK_RM[@]}" >/dev/null 2>&1; }
stop_rank() {  # scancel, the time limit, or another rank's failure: take the container with us
  trap - TERM INT HUP
  [ -n "${INK_ENGINE_PID:-}" ] && kill "$INK_ENGINE_PID" 2>/dev/null
  [ -n "${INK_LOGS_PID:-}" ] && kill "$INK_LOGS_PID" 2>/dev/null
  remove_container
  note "stopped"
  exit 143
}
secret_env() {  # FILE VAR=SECRET:env:NAME|VAR=SECRET:file:PATH...: 0600; $INKCTL_SECRETS_FILE, else as the recipe says
  local file=$1 spec var secret how src value line
  shift
  mkdir -p "$(dirname "$file")" && (umask 077 && : > "$file") || fail "cannot write $file"
  for spec in "$@"; do
    var=${spec%%=*}; spec=${spec#*=}; secret=${spec%%:*}; spec=${spec#*:}; how=${spec%%:*}; src=${spec#*:}
    value=
    if [ -n "${INKCTL_SECRETS_FILE:-}" ]; then
      [ -r "$INKCTL_SECRETS_FILE" ] || fail "cannot read \$INKCTL_SECRETS_FILE ($INKCTL_SECRETS_FILE)"
      while IFS= read -r line; do
        case "$line" in "$secret="*) value=${line#*=}; break ;; esac
      done < "$INKCTL_SECRETS_FILE"
    fi
    if [ -z "$value" ]; then
      case "$how" in
        env) value=${!src:-} ;;
        file) src=${src/#\~/${HOME:-}}; [ -r "$src" ] && { read -r value < "$src" || true; } ;;
      esac
    fi
    [ -n "$value" ] || fail "secret $secret is not set (\$INKCTL_SECRETS_FILE, or the recipe's $how $src on this node)"
    printf '%s=%s\n' "$var" "$value" >> "$file"
  done
}
check_image() {  # PIN ARGV...: the image on this node is the pinned one (image id or repo digest)
  local pin=$1 found
  shift
  found=$("$@" 2>/dev/null) || fail "image ${!#} is not on this node"
  case " $found " in *" $pin "*|*"@$pin "*) return 0 ;; esac
  fail "image ${!#} is not the pinned $pin (found: $found)"
}
check_size() {  # PATH SIZE: a pinned model file is there, whole
  local size
  size=$(stat -L -c %s "$1" 2>/dev/null) || fail "pinned model file $1 is missing (inkctl weights)"
  [ "$size" = "$2" ] || fail "pinned model file $1 has $size bytes, the lock says $2 (inkctl weights)"
}
wait_tcp() {  # HOST PORT TIMEOUT: until something listens there
  local end=$((SECONDS + $3))
  until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
    [ "$SECONDS" -lt "$end" ] || fail "nothing answered on $1:$2 within $3 s"
    sleep 0.5
  done
}
wait_until() {  # TIMEOUT EXPECT COUNT ARGV...: until ARGV exits 0 (its output holding EXPECT COUNT times)
  local end=$((SECONDS + $1)) expect=$2 count=$3 out
  shift 3
  while :; do
    if out=$("$@" 2>&1); then
      [ -z "$expect" ] && return 0
      [ "$(grep -o -F -- "$expect" <<<"$out" | wc -l)" -ge "$count" ] && return 0
    fi
    [ "$SECONDS" -lt "$end" ] || fail "timed out after $1 s: $*"
    sleep 1
  done
}
load_env() {  # FILE [PREFIX]: export its NAME=value lines literally (no shell evaluation), then remove it
  local line
  while IFS= read -r line; do export "${2:-}$line"; done < "$1"
  rm -f "$1"
}
run_foreground() {  # the engine in this task's foreground (pyxis, apptainer): its exit ends the rank
  note "running"
  echo "inkctl: rank $INK_RANK starts the engine on $SLURMD_NODENAME ($INK_NODE_ADDR)"
  "$@" &
  INK_ENGINE_PID=$!
  wait "$INK_ENGINE_PID"
  fail "the engine exited with code $?"
}
run_step() { "$@" || fail "exit $?: $*"; }
start_container() {
  "$@" >/dev/null || fail "the container did not start (exit $?)"
  [ -z "${INK_ENV_FILE:-}" ] || rm -f "$INK_ENV_FILE"  # read by the runtime's client: no secret left on disk
  note "running"
  echo "inkctl: rank $INK_RANK started $INK_CONTAINER on $SLURMD_NODENAME ($INK_NODE_ADDR)"
}
follow_container() {  # the engine's output into the job's; its exit ends this rank
  local code
  "${INK_LOGS[@]}" 2>&1 &
  INK_LOGS_PID=$!
  "${INK_WAIT[@]}" > "$INK_DIR/status/.wait$INK_RANK" 2>&1 &
  wait $!
  code=$(tr -dc 0-9 < "$INK_DIR/status/.wait$INK_RANK")
  sleep 0.5
  kill "$INK_LOGS_PID" 2>/dev/null
  fail "the engine exited with code ${code:-unknown}"
}'''.strip("\n").split("\n")


def batch_functions() -> list[str]:
    return r'''
check_sha256() {  # PATH SHA256
  echo "$2  $1" | sha256sum -c --status - && return 0
  echo "inkctl: $1: sha256 is $(sha256sum < "$1" | cut -d' ' -f1), the pin is $2" >&2
  return 1
}
http_ok() {
  if command -v curl >/dev/null; then curl -fsS -o /dev/null --max-time 5 "$1" 2>/dev/null; return; fi
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1" 2>/dev/null
}
wait_health() {  # URL TIMEOUT INTERVAL: the head answers, or the step ended, or time is up
  local end=$((SECONDS + $2))
  until http_ok "$1"; do
    if ! kill -0 "$INK_STEP" 2>/dev/null; then
      echo "inkctl: the ranks ended before $1 answered" >&2
      wait "$INK_STEP"
      return 1
    fi
    if [ "$SECONDS" -ge "$end" ]; then
      echo "inkctl: no answer from $1 within $2 s" >&2
      return 1
    fi
    sleep "$3"
  done
  echo "inkctl: ready: $1"
}
report_ranks() {  # N: how each rank ended; the job's failure names its rank and host
  local i line
  if kill -0 "$INK_STEP" 2>/dev/null; then
    kill "$INK_STEP" 2>/dev/null
    wait "$INK_STEP" 2>/dev/null
  fi
  # a rank killed without its trap (SIGKILL) leaves its container: remove every rank's
  srun --ntasks-per-node=1 --kill-on-bad-exit=0 bash "$INK_DIR/rank.sh" cleanup >/dev/null 2>&1
  for ((i = 0; i < $1; i++)); do
    line=$(cat "$INK_DIR/status/rank$i" 2>/dev/null || echo "? not started")
    case "$line" in
      *" failed "*) echo "inkctl: FAILED: rank $i on ${line%% *}: ${line#* failed }" >&2 ;;
      *) echo "inkctl: rank $i on ${line%% *}: ${line#* }" ;;
    esac
  done
}'''.strip("\n").split("\n")
