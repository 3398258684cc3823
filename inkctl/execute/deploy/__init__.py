"""Up and down: bring-up, the plan runner, preflight, replacing, take-down, env files."""
