"""Run the whole fault matrix for real and print: fault, injected, survived, data lost, seconds.

    .venv/bin/python bench/faults.py [WORKDIR]            every class (rounds one to five)
    .venv/bin/python bench/faults.py WORKDIR NAME...      only the scenarios named (functions of the four modules)

Some scenarios of rounds three to five need root (a tmpfs, a frozen cgroup, a second user, a mount namespace);
elsewhere they say skipped.
"""

import sys

from dlbench.testing import faults, faults_bounded, faults_machine, faults_node

ALL = faults.SCENARIOS + faults_machine.SCENARIOS + faults_node.SCENARIOS + faults_bounded.SCENARIOS

if __name__ == "__main__":
    names = sys.argv[2:]
    chosen = [s for s in ALL if s.__name__ in names] if names else ALL
    sys.exit(faults.main(sys.argv[1:2], chosen))
