"""The names inkctl gives what it puts on a container, whichever runtime: its labels' prefix and
the line ``inspect`` prints per container. A leaf: every module of the package may import it."""

LABEL_PREFIX = "inkctl."  # every label inkctl puts on a container
INSPECT_FORMAT = "{{.Name}}|{{.State.Status}}|{{.State.ExitCode}}|{{.State.FinishedAt}}"
