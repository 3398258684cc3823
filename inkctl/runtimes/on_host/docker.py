"""docker: the grammar every docker-like runtime starts from (``grammar.DockerLike``)."""

from inkctl.runtimes.grammar import DockerLike, Runtime


class Docker(DockerLike):
    name = "docker"


RUNTIME: Runtime = Docker()  # mypy checks it fills the protocol
