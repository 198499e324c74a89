#!/usr/bin/env bash
# ensure-python.sh: make sure Debian's python3 and python3-psycopg2 are
# installed for the Python client's tests (clients/python) and its
# PostgreSQL example. Installs them with apt-get when missing (root on
# Debian/Ubuntu); diagnostics go to stderr.
set -euo pipefail
py=${PYTHON:-/usr/bin/python3}
if [[ -x $py ]] && "$py" -c 'import psycopg2' 2>/dev/null; then
	exit 0
fi
command -v apt-get >/dev/null || { echo "ensure-python: $py with psycopg2 missing and apt-get not available" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "ensure-python: must run as root to install python3-psycopg2" >&2; exit 1; }
echo "ensure-python: installing python3 python3-psycopg2 with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq python3 python3-psycopg2 >&2 || { apt-get update -qq >&2 && apt-get install -y -qq python3 python3-psycopg2 >&2; }
