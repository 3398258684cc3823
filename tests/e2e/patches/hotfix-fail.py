"""Test hotfix that fails: the engine must not start."""
import sys

print("hotfix-fail: the kernel table is not what this hotfix expects", file=sys.stderr)
sys.exit(3)
