"""The inkctl fake engine playing vLLM's Python package (tests/cluster/fake_engine)."""
__version__ = "0.11.0"
