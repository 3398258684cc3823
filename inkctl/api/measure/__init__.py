"""A served model's answers and speed: smoke, bench, results, top, and which server they talk to."""
