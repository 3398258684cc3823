"""Running ranks: the health wait, `inkctl watch`, the boot watchdog, NCCL, logs."""
