"""``critic_loop``: coder → critic (or a panel of focused critics) → fixer until approval, with an
optional meta-critic; the coder agent is shared with ``baseline`` and ``self_refine``."""
