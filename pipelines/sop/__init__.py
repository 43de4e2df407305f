"""``sop`` (MetaGPT): product manager → architect → engineer → QA engineer, typed handoffs that the
receiver validates, and a reviewer gate."""
