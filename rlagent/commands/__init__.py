"""One module per CLI command beyond check/run; each exposes a typer command function that
`rlagent.cli` registers. Commands build settings and deps and call library code, nothing more."""
