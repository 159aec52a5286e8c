"""`python -m rlagent`: the program, started as the installed `rlagent` script starts it."""

import rlagent

rlagent.hold_collector()  # before the commands' imports, as for the `rlagent` script (rlagent/__init__.py)

from rlagent.cli import main  # noqa: E402

main()
