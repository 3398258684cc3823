"""Reading what the hosts have, changing nothing: status, logs, doctor, the network, the lease."""
