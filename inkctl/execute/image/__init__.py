"""Images: build or deliver what is missing, push, the local daemon, what `inkctl lock` pins."""
