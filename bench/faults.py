"""Run the whole fault matrix for real and print: fault, injected, survived, data lost.

    .venv/bin/python bench/faults.py [WORKDIR]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dlbench import faultmatrix  # noqa: E402

if __name__ == "__main__":
    sys.exit(faultmatrix.main(sys.argv[1:]))
