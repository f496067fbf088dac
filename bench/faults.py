"""Run the whole fault matrix for real and print: fault, injected, survived, data lost.

    .venv/bin/python bench/faults.py [WORKDIR]
"""

import sys

from dlbench.testing import faults

if __name__ == "__main__":
    sys.exit(faults.main(sys.argv[1:]))
