"""The old home of the renderers, split by what each does: ``terminal`` (consoles, folding),
``errors_view`` (errors and problems), ``shell_text`` (argv as shell text), ``plan_text`` and
``plan_json`` (a plan for people and for machines), ``listing`` (``inkctl recipes``). These names
stay importable from here for code written against it; new code imports the module itself."""

from __future__ import annotations

from inkctl.cli.errors_view import print_error, print_problems
from inkctl.cli.listing import recipe_listing
from inkctl.cli.plan_json import plan_json, step_json
from inkctl.cli.plan_text import identity, print_plan
from inkctl.cli.shell_text import _shell, image_index
from inkctl.cli.terminal import Folded, Plain, _isatty, console, escape, fold, plain, relative, screen_width, visible

__all__ = ["Folded", "Plain", "_isatty", "_shell", "console", "escape", "fold", "identity", "image_index", "plain",
           "plan_json", "print_error", "print_plan", "print_problems", "recipe_listing", "relative", "screen_width",
           "step_json", "visible"]
