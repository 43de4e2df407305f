"""``role_play`` (CAMEL): a task specifier, then an instructor and an assistant taking turns."""
