# The two commands: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: demo test lint typecheck unit docs docs-serve pictures conformance-page wheel node-peers python-peers system-deps conformance bench soak fuzz clean catalogs

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "elicitor needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/elicitor demo

# Two cores: the conformance harness, the longest step, starts first; the old peers' environments (mostly waiting on
# the package index), the checks of the source, the site and the wheel run beside it (three at a time, each step's
# output shown whole when it ends); then the suite alone, in two worker processes (a test spends most of its
# time waiting on the processes it starts: one process used under half a core). A test file runs whole in one worker,
# so a module's browser, cluster or fuzz campaigns start once.
test: lint
	$(MAKE) --no-print-directory -j3 --output-sync=target conformance python-peers typecheck docs wheel
	$(MAKE) --no-print-directory unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) node-peers system-deps
	$(BIN)/pytest -n 2 --dist loadfile --durations=15  # the slowest named at the end: it must stay well under 20 minutes

# The documentation site (mkdocs-material, mkdocstrings): built with --strict, so a broken link, a missing reference
# or any warning fails it. Mermaid comes from the npm registry into docs/assets/: no page loads anything from a CDN.
MERMAID := docs/assets/mermaid.min.js
$(MERMAID):
	@mkdir -p .cache/mermaid docs/assets
	cd .cache/mermaid && npm pack --silent mermaid@11.6.0 >/dev/null && tar -xzf mermaid-11.6.0.tgz package/dist/mermaid.min.js
	cp .cache/mermaid/package/dist/mermaid.min.js $@

docs: $(STAMP) $(MERMAID)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The documentation's pictures (docs/images/), from what the tests capture of the real terminal and browser.
pictures: $(STAMP) system-deps node-peers
	$(BIN)/pytest -q -p no:cacheprovider tests/test_screen.py::test_the_demo_in_a_real_terminal \
	  tests/test_screen.py::test_the_tutorials_server_in_a_real_terminal \
	  tests/test_browser_ui.py::test_every_field_kind_in_chromium_with_review_and_a_screenshot \
	  tests/test_browser_ui.py::test_url_consent_in_the_browser \
	  "tests/test_i18n.py::test_the_full_screen_in_chinese_lines_up_by_cells" \
	  "tests/test_a11y.py::test_every_page_state_has_no_wcag_violation_and_works_from_the_keyboard[zh-Hans]"
	$(BIN)/python scripts/pictures.py

docs-serve: $(STAMP) $(MERMAID)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# Debian's packages the tests run for real, if missing: chromium (the browser UI tests drive it with Playwright),
# tmux (the real-terminal test), redis-server and nginx (replicas behind a balancer, sharing Redis), a Chinese font
# (the Chinese pages' screenshots).
SYSTEM_PACKAGES := chromium tmux redis-server nginx fonts-wqy-microhei
system-deps:
	@command -v chromium >/dev/null && command -v tmux >/dev/null && command -v redis-server >/dev/null && \
	  { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } && fc-list :lang=zh | grep -q . || { \
	  echo "installing Debian's $(SYSTEM_PACKAGES) for the tests"; \
	  $(APT) install -y -q $(SYSTEM_PACKAGES) >/dev/null 2>&1 || \
	  { $(APT) update -q >/dev/null && $(APT) install -y -q $(SYSTEM_PACKAGES) >/dev/null; }; }

# The message catalogs: the English sentences extracted from the source, merged into each language's .po (a new one
# arrives untranslated: tests/test_i18n.py fails until it is translated), and compiled (scripts/catalogs.py).
catalogs: $(STAMP)
	$(BIN)/python scripts/catalogs.py

# The wheel as users install it: built, installed into fresh virtual environments (plain and with each extra),
# and run there.
wheel: $(STAMP)
	$(BIN)/python scripts/wheel_check.py

# Node 22, the conformance harness, the TypeScript SDK (a test peer) and axe-core (the accessibility rules), from
# npm into .cache/ on first use; then old releases of the official SDKs and FastMCP, one environment each under
# .cache/peers/ (scripts/peers.py: tests/test_eras.py runs them).
node-peers: $(STAMP)
	$(BIN)/python scripts/conformance.py --install-only
	$(BIN)/python scripts/peers.py

# The old releases' Python environments alone (most of scripts/peers.py's time, spent waiting on the index): make
# test makes them beside the checks, a third job that needs no core of its own.
python-peers: $(STAMP)
	$(BIN)/python scripts/peers.py --python

# The official MCP conformance harness (Node 22 and the harness install from npm into .cache/ on first use).
conformance: $(STAMP) system-deps
	$(BIN)/python scripts/conformance.py

# The same run, then its results into docs/data/conformance.json, which the documentation's conformance page shows.
conformance-page: $(STAMP) node-peers system-deps
	$(BIN)/python scripts/conformance.py --page

# Against the official SDK and FastMCP on one workload; elicitor's replicas behind nginx with and without Redis; tasks waiting
# for a person; what the proxy adds; what each uvicorn stack (h11, httptools, uvloop) is worth; what OpenTelemetry
# costs without an SDK and with one.
bench: $(STAMP) system-deps
	$(BIN)/python -m pip install --quiet 'fastmcp==4.2.3'  # a peer to compare with, for the benchmarks only
	$(BIN)/python bench/run.py
	$(BIN)/python bench/replicas.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/proxy.py
	$(BIN)/python bench/stacks.py
	$(BIN)/python bench/telemetry.py --instructions
	$(BIN)/python bench/charts.py
	$(BIN)/python bench/guard.py  # which scenario fell against bench/recorded.json, and by how much

# Many concurrent sessions on both eras and transports, random answers, cancellations, vanishing clients, servers
# killed and restarted; fails on a hung or wrong call or on unbounded growth (soak/run.py). `make test` runs a
# 40-second one (tests/test_soak.py). Then the whole fault suite: every fault on both eras on three replicas behind
# nginx (tests/test_faults.py; `make test` runs five of its scenarios). Then people who take 20 s, 90 s and four
# minutes to sign in, against the client's default clocks (tests/test_sign_in_pace.py; `make test` scales both down).
# Last, the fault probe: a dozen clients of both eras and both SDKs, for two users, through nginx to three replicas
# while replicas are killed, stopped and stopped for long, Redis restarts and pauses and nginx reloads, one kind at a
# time then PROBE_MIXED seconds of them mixed; a checker fails the run on anything that must never happen
# (soak/probe.py; about 10 minutes).
DURATION ?= 300
PROBE_MIXED ?= 240
soak: $(STAMP)
	$(BIN)/python soak/run.py --duration $(DURATION)
	ELICITOR_FAULTS=soak $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_faults.py
	ELICITOR_PACE=real $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_sign_in_pace.py
	$(BIN)/python soak/probe.py --mixed $(PROBE_MIXED)

# Coverage-guided fuzzing of every parser of peer input (fuzz/targets/), FUZZ_SECONDS per target, FUZZ_JOBS at once;
# new inputs go to .cache/fuzz/corpus/, crashes to .cache/fuzz/crashes/. `make test` runs a few seconds of each.
FUZZ_SECONDS ?= 300
FUZZ_JOBS    ?= 1
fuzz: $(STAMP)
	$(BIN)/python -m fuzz.run --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
