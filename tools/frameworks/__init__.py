"""Parsers for verl, TRL and OpenRLHF logs and files (and prime-rl metric names).

Leaf modules, one job each; nothing here imports the rest of rlagent. Formats and names follow
shared/reference/frameworks.md. Modules that need a third-party reader (tensorboard, pyarrow) import
it inside the function that reads, so importing this package stays cheap.
"""
