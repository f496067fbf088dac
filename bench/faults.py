"""Run the whole fault matrix for real and print: fault, injected, survived, data lost, seconds.

    .venv/bin/python bench/faults.py [WORKDIR]            every class (rounds one to four)
    .venv/bin/python bench/faults.py WORKDIR NAME...      only the scenarios named (functions of the three modules)

Some scenarios of rounds three and four need root (a tmpfs, a frozen cgroup, a second user, a mount namespace);
elsewhere they say skipped.
"""

import sys

from dlbench.testing import faults, faults_machine, faults_node

ALL = faults.SCENARIOS + faults_machine.SCENARIOS + faults_node.SCENARIOS

if __name__ == "__main__":
    names = sys.argv[2:]
    chosen = [s for s in ALL if s.__name__ in names] if names else ALL
    sys.exit(faults.main(sys.argv[1:2], chosen))
