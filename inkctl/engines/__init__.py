"""The engines: one module per kind (``vllm.py``, ``sglang.py``), each defining ``SPEC``, an
``EngineSpec`` (``inkctl/recipe/engine_registry.py``). The registry finds the modules here by
name and imports one only when a recipe names its kind. docs/engines.md: how to add one."""
