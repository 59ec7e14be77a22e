"""`python -m chaos [--scale ci|full] [--json] [--only NAME ...]`: run the fault scenarios
and print the table (exit status 1 when any scenario lost, duplicated or leaked anything)."""

from __future__ import annotations

import sys

from chaos.report import main

if __name__ == "__main__":
    sys.exit(main())
