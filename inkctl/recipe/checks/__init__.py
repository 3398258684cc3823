"""Checks across a recipe's fields: the rules, the parallel layout, accelerators, flags against the engine's releases."""
