"""`python -m dlbench COMMAND`: the `dlbench` command where the console script is not on PATH."""

import sys

from dlbench.cli import main

sys.exit(main())
