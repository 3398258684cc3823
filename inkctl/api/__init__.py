"""Commands below the command line: what `up` and `watch` do between their flags and their output."""
