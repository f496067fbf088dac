import sys

from dlbench.evidence.command import main

sys.exit(main())
