"""Output piped or redirected fits 80 columns too (issue 18): a terminal folds long lines, a
pipe into `less`, a file or a CI log did not. Every bundled recipe through the real CLI with
stdout and stderr piped and no COLUMNS: plan, plan --full and validate; machine formats stay
whole. And the product's text speaks the user's words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
WIDTH = 80
NOT_THE_USERS_WORDS = ("the source", "field report", "weightless repo", "registry record")


def inkctl(*args: str, cwd: Path = ROOT, columns: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1")
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def bundled() -> list[str]:
    r = inkctl("recipes", "-o", "json")
    assert r.returncode == 0, r.stderr
    return [x["recipe"] for x in json.loads(r.stdout)]


def too_wide(text: str, width: int = WIDTH) -> list[str]:
    """Lines wider than the screen, but for a line that is one word a person pastes (a path, a URL,
    a hash) wider than the screen itself: that is never broken (issue 29), so it runs past."""
    from inkctl.cli.show.terminal import _whole

    def one_whole_word(line: str) -> bool:
        words = line.strip().rstrip(" \\").split()
        return len(words) == 1 and _whole(words[0]) and len(words[0]) > width - 8

    return [f"{len(line)}: {line}" for line in text.splitlines() if len(line) > width and not one_whole_word(line)]


DRIVER = """
import io, json, sys
from inkctl.cli import app
out = []
for args in json.loads(sys.argv[1]):
    so, se = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = so, se
    try:
        app.main(args)
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        for s in (sys.stdout, sys.stderr):
            s.flush()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    out.append({"args": args, "code": code, "stdout": so.getvalue(), "stderr": se.getvalue()})
print(json.dumps(out))
"""


def test_plan_and_validate_piped_fit_80_columns(tmp_path):
    """Every bundled recipe, from another directory (the recipe's absolute path is in every
    warning): ``plan``, ``plan --full`` and ``validate``, through the CLI's own entry (one process
    for all of them: a process each took minutes on a busy machine), output to a pipe."""
    calls = [list(a) for n in bundled() for a in (("plan", n), ("plan", n, "--full"), ("validate", n))]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(calls)], cwd=tmp_path, capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert len(results) == len(calls) >= 3 * 16
    for x in results:
        assert x["code"] in (0, 1), x
        wide = too_wide(x["stdout"]) + too_wide(x["stderr"])
        assert not wide, f"inkctl {' '.join(x['args'])}:\n" + "\n".join(wide)
        said = (x["stdout"] + x["stderr"]).lower()
        assert not [w for w in NOT_THE_USERS_WORDS if w in said], said


def test_columns_is_the_width_when_given_and_json_stays_whole(tmp_path):
    name = "inkling-small-2x-dgx-spark-vllm"
    r = inkctl("plan", name, columns="60", cwd=tmp_path)
    assert r.returncode == 0 and not too_wide(r.stdout + r.stderr, 60)
    r = inkctl("plan", name, "-o", "json", cwd=tmp_path)
    assert r.returncode == 0
    assert any(len(line) > WIDTH for line in r.stdout.splitlines())  # a program reads it: whole
    json.loads(r.stdout)


def test_a_folded_command_stays_one_command_for_the_shell():
    """A hint's `inkctl ...` broken over lines ends each broken line with ` \\`: pasted into a
    shell, it is the same command."""
    from inkctl.cli.show.terminal import fold

    line = ("hint: once the host is back, run: inkctl down /srv/projects/deploy/recipes/inkling-small-2x.yaml "
            "--hosts /srv/projects/deploy/inventories/two-sparks.yaml; then up again")
    lines = fold(line, WIDTH)
    assert len(lines) > 1 and all(len(x) <= WIDTH for x in lines)
    command = " ".join(lines)[line.index("inkctl"):]
    words = subprocess.run(["sh", "-c", 'printf "%s\\n" ' + "\n".join(lines)[line.index("inkctl"):].split(";")[0]],
                           capture_output=True, text=True).stdout.split()
    assert words == line[line.index("inkctl"):].split(";")[0].split(), command


def test_a_long_sh_c_script_in_a_plan_is_folded_where_sh_joins_it_again():
    from inkctl.cli.show.shell_text import _shell

    script = ("printf '%s|' 'two words' \"and  three\"; sync; if { echo 1 > /dev/null; } 2>/dev/null; then echo "
              "dropped; else echo denied; fi; printf '%s|' 'a b  c' \"x  y z\" done at the end of a long script")
    text = _shell(("sh", "-c", script, "inkctl-drop-page-cache"))
    assert len(text.splitlines()) > 2 and all(len(x) <= 78 for x in text.splitlines()), text
    # the shell reads the printed command back; the script it gets runs as the original does
    printed = subprocess.run(["sh", "-c", "set -- " + text + '\nprintf "%s" "$3"'], capture_output=True,
                             text=True).stdout
    assert printed != script  # broken over lines ...
    run = [subprocess.run(["sh", "-c", s], capture_output=True, text=True).stdout for s in (printed, script)]
    assert run[0] == run[1] == "two words|and  three|dropped\na b  c|x  y z|done|at|the|end|of|a|long|script|"


def test_on_a_terminal_a_problem_line_folds_as_one_line_with_colour_codes(monkeypatch):
    """validate prints a problem in two pieces (the coloured severity, then the text) and its hint
    dim: on a terminal the fold must see the line as it shows, not count colour codes as columns
    (the text used to continue 26 columns in, the hint's rest at 4)."""
    import io

    from inkctl.cli.show.terminal import Plain, visible

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = Tty()
    p = Plain(out)
    p.print("  [yellow]warning[/] INK208 ", end="")
    p.print("r.yaml:13:3: engine.image.digest: image vllm/vllm-openai:v0.28.0 is not pinned by digest",
            markup=False)
    p.print("      hint: set digest: sha256:<64 hex>, or run `inkctl lock` to pin what the hosts have",
            markup=False, style="dim")
    lines = visible(out.getvalue()).splitlines()
    assert "\x1b[" in out.getvalue() and all(len(ln) <= 80 for ln in lines), lines
    assert lines[0].startswith("  warning INK208 r.yaml:13:3: engine.image.digest:")
    assert lines[1].startswith("      vllm/vllm-openai") and lines[1][6] != " "  # hangs 4 past the 2-space indent
    assert lines[2].startswith("      hint: ") and lines[3].startswith("          hosts have"), lines
