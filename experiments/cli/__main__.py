"""``python -m experiments.cli``: the ``critiquelab`` command (the runs' own invocation)."""

import sys

from experiments.cli.main import main

sys.exit(main())
