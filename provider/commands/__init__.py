"""Subcommands of the ``deltaguard`` CLI; each module has ``add_arguments(parser)`` and ``run(args) -> int``."""
