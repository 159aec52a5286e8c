"""One module per CLI command; each exposes a typer command function that `rlagent.cli` registers.
Commands build settings and deps and call library code, nothing more. What several commands share
is in `common` (consoles, errors, settings, the monitor, the summary line) and `offer` (the
approval prompt); no command imports `rlagent.cli`."""
