# Developer tasks. `make help` lists them. Tests never reach the network: Claude is replayed from
# cassettes (tests/cassettes/) recorded against the local Messages API stub or the real API.

PYTHON ?= $(shell [ -x .venv/bin/python ] && echo .venv/bin/python || echo python)
CASSETTE_TESTS := tests/test_llm_cassettes.py

.PHONY: help test test-nightly lint format record-cassettes record-cassettes-stub

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-24s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

test: ## Run the test suite (network blocked, cassettes replayed)
	$(PYTHON) -m pytest

test-nightly: ## The robustness suites at nightly size (240 SIGKILLs, ~11,000 fuzz cases; full disk needs root)
	RLAGENT_NIGHTLY=1 $(PYTHON) -m pytest tests/test_crash_injection.py tests/test_fuzz_readers.py tests/test_fuzz_frameworks.py tests/test_full_disk.py tests/test_injection.py

lint: ## ruff lint and format check
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format: ## ruff format and autofix
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

record-cassettes: ## Re-record the Claude cassettes against the real API (needs ANTHROPIC_API_KEY; spends tokens)
	@if [ -z "$$ANTHROPIC_API_KEY" ]; then echo "record-cassettes: set ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL optional)"; exit 2; fi
	RLAGENT_RECORD_LIVE=1 $(PYTHON) -m pytest $(CASSETTE_TESTS) --record-mode=rewrite -p no:cacheprovider
	$(PYTHON) -m pytest $(CASSETTE_TESTS)

record-cassettes-stub: ## Re-record the Claude cassettes against the local Messages API stub (no key, no network)
	$(PYTHON) -m pytest $(CASSETTE_TESTS) --record-mode=rewrite
	$(PYTHON) -m pytest $(CASSETTE_TESTS)
