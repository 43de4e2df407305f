"""``python -m experiments.cli``: the ``critiquelab`` command (the runs' own invocation)."""

import sys

from experiments.cli import main

sys.exit(main())
