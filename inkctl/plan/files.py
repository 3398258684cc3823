"""The files a Run step writes on its host in the same remote command (``Run.files``).

One round trip per rank instead of an SFTP session beside the launch: the files travel as a
tar archive on the command's stdin (secrets never on a command line, so never in a remote
``ps``), are unpacked into the deployment directory, then the planned argv is exec'd. Pure:
the script, the argv and the archive are built here; the executor sends them.
"""

from __future__ import annotations

import posixpath

from inkctl.plan.step import Run

# $1 is the directory the files go to; the rest is the planned argv. A file is created under
# umask 077 (a secret is never readable by others, not even while being written) and gets its
# planned mode once written (tar -p); the command starts only when every file is in place.
WRITE_THEN_RUN = "\n".join([
    'd="$1"; shift',
    'mkdir -p -- "$d" || exit 125',
    '(umask 077 && exec tar -x -p -f - -C "$d" --no-same-owner) || '
    '{ echo "inkctl: cannot write the launch files under $d" >&2; exit 125; }',
    'exec "$@" </dev/null',
    "",
])


def files_dir(step: Run) -> str:
    """The directory every file of ``step`` lies under (the deployment directory)."""
    return posixpath.commonpath([posixpath.dirname(f.path) for f in step.files])


def remote_argv(step: Run, base: str | None = None) -> tuple[str, ...]:
    """What really runs on the host for ``step``: its argv, behind the file writer when it has files."""
    if not step.files:
        return step.argv
    return ("sh", "-c", WRITE_THEN_RUN, "inkctl-launch", base or files_dir(step), *step.argv)


def archive(base: str, files: list[tuple[str, bytes, int]]) -> bytes:
    """A tar archive of (absolute path under ``base``, content, mode); directories 0755."""
    import io
    import tarfile

    buf = io.BytesIO()
    dirs: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, content, mode in files:
            rel = posixpath.relpath(path, base)
            if rel.startswith(".."):
                raise ValueError(f"{path} is not under {base}")
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    dirs.add(d)
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()
