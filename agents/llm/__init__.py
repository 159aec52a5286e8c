"""Claude as diagnostician: context, prompts, calls, evidence checks, the runtime a check-in uses."""
