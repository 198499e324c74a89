#!/usr/bin/env bash
# test-python.sh: install the Python client the way its README says, offline
# with Debian's setuptools and wheel (no PyPI), into a temporary directory,
# and run its tests (clients/python/tests) against that installed package,
# not the source tree. make test-python runs it.
#
# The build runs in a copy of the source, because setuptools writes build/
# and fencer.egg-info beside pyproject.toml; the copy and the install are
# removed on exit, so the tree and the machine keep nothing.
#
# Environment: PYTHON (default /usr/bin/python3), FENCER_BIN (the fencer
# binary the tests start), FENCER_TEST_PG_DSN (the PostgreSQL example),
# FENCER_TEST_REDIS_ADDR and FENCER_TEST_REDIS_RESTART (the Redis fence,
# from scripts/with-redis.sh).
set -euo pipefail
py=${PYTHON:-/usr/bin/python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencer-py-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cp -R "$repo/clients/python" "$tmp/src"
# --target installs beside nothing else and needs no venv; Debian's pip
# refuses an install into its own Python (PEP 668) but not into a target.
"$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
	--no-build-isolation --no-index --no-deps --target "$tmp/site" "$tmp/src"
cd "$repo/clients/python"
# tests/__init__.py puts FENCER_PY_SITE first on sys.path and checks that
# the fencer it imports is the installed one.
FENCER_PY_SITE="$tmp/site" "$py" -m unittest discover -s tests -t .
