"""The Claude client and its budgets: HTTP, retries, token and cost caps."""
