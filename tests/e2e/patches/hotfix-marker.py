"""Test hotfix: proves it ran inside the container, before the engine, by leaving a marker."""
import os
import time

with open("/tmp/inkctl-hotfix-marker", "w") as f:
    f.write(f"hotfix ran at {time.time():.3f} in pid {os.getpid()}\n")
print("hotfix-marker: marker written")
