"""rlagent: watches prime-rl RL training runs."""
