"""What several commands share: options and their values, help text, logging, signals."""
