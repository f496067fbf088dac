"""Run the whole fault matrix for real and print: fault, injected, survived, data lost, seconds.

    .venv/bin/python bench/faults.py [WORKDIR]            every class (rounds one to three)
    .venv/bin/python bench/faults.py WORKDIR NAME...      only the scenarios named (functions of the two modules)

Some scenarios of round three need root (a tmpfs, a frozen cgroup, a second user); elsewhere they say skipped.
"""

import sys

from dlbench.testing import faults, faults_machine

ALL = faults.SCENARIOS + faults_machine.SCENARIOS

if __name__ == "__main__":
    names = sys.argv[2:]
    chosen = [s for s in ALL if s.__name__ in names] if names else ALL
    sys.exit(faults.main(sys.argv[1:2], chosen))
