"""Recipes of other tools (sparkrun, the vLLM recipes repository) and recipe repositories from elsewhere."""
