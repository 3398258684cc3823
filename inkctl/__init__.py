"""inkctl: bring up giant MoE models on unusual hardware from a validated recipe."""

__version__ = "0.1.0"
