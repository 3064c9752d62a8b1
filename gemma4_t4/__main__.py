"""`python -m gemma4_t4`: the operator's command line (gemma4_t4.cli)."""

import sys

from gemma4_t4.cli import main

sys.exit(main())
