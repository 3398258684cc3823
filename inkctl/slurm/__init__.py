"""Running the plan as a Slurm job from the login node: Slurm's commands (``ctl``) and
``up``/``down`` of a job (``run``). Stands on ``execute.deploy`` (health, secrets) and
``export`` (the sbatch script)."""
