"""What the command line shows: the terminal, plans, tables, errors and live views, as text or JSON."""
