"""Subcommands of the ``deltaguard`` CLI; each module has ``add_arguments(parser)`` and ``run(args) -> int``."""


class UsageError(ValueError):
    """The command's input is invalid (an argument, a file it names, a configured option).

    ``deltaguard`` prints its message as one line on stderr and exits with :data:`USAGE_EXIT`, the code
    argparse uses for a malformed command line.
    """


#: exit code for invalid input, as argparse's
USAGE_EXIT = 2
