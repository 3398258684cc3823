"""Unit tests that read a command's messages run it with a wide screen (COLUMNS=200), as the
end-to-end suite does: what they check is what is said, not how it is folded. Piped output is
folded to $COLUMNS, else 80 columns (inkctl.cli.app._fold_pipes); the tests of the width itself
(test_piped_width.py, test_terminal_width.py) take COLUMNS away again."""

import os

os.environ.setdefault("COLUMNS", "200")
