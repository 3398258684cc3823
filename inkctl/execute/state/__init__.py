"""What the hosts have, read at run time: probe, containers, GPUs, images, the deploy lock."""
