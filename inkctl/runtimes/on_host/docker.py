"""docker: the grammar every docker-like runtime starts from (``grammar.DockerLike``)."""

from inkctl.runtimes.grammar import DockerLike


class Docker(DockerLike):
    name = "docker"


RUNTIME = Docker()
