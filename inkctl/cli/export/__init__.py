"""``inkctl export``: one module per target (Kubernetes, Prometheus, Slurm, systemd), registered by ``app.py``."""
