"""`python -m rlagent`: the program, started as the installed `rlagent` script starts it (the
package's import has held collections and set the start-up Ctrl-C handler: rlagent/__init__.py)."""

from rlagent.cli import main

main()
