"""A patched image on paper: its build context, the verify/apply script, the strict patcher."""
