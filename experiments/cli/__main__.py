"""``python -m critiquelab.experiments.cli``: the ``critiquelab`` command (the runs' own invocation)."""

import sys

from critiquelab.experiments.cli.main import main

sys.exit(main())
