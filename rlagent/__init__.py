"""rlagent: watches prime-rl RL training runs."""

from loguru import logger

# A library stays quiet unless its application asks: the CLI enables these logs.
logger.disable("rlagent")
