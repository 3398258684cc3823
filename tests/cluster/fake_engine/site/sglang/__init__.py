"""The inkctl fake engine playing SGLang (see fake_engine/sglang.py)."""
__version__ = "0.5.4"
