"""The container runtimes a recipe may name (``container.runtime``): one module each, named for
the word, holding ``RUNTIME``. A module here is registered by being here (``runtimes.names``)."""
