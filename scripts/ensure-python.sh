#!/usr/bin/env bash
# ensure-python.sh: make sure Debian's python3 with pip, setuptools and wheel
# (to install the Python client offline: pip install --no-build-isolation),
# python3-psycopg2 (its PostgreSQL example), python3-redis (its Redis
# fence, fencer.redis_fence) and python3-aiohttp (its asyncio client,
# fencer.aio, and that client's conformance agent) are installed for the
# Python client's tests (clients/python). Installs the missing packages with
# apt-get (root on Debian/Ubuntu); diagnostics go to stderr.
set -euo pipefail
py=${PYTHON:-/usr/bin/python3}
pkgs=(python3 python3-pip python3-setuptools python3-wheel python3-psycopg2 python3-redis python3-aiohttp)
if [[ -x $py ]] && "$py" -c 'import setuptools, wheel, psycopg2, redis, aiohttp' 2>/dev/null && "$py" -m pip --version >/dev/null 2>&1; then
	exit 0
fi
command -v apt-get >/dev/null || { echo "ensure-python: $py with pip, setuptools, wheel, psycopg2, redis and aiohttp missing and apt-get not available" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "ensure-python: must run as root to install ${pkgs[*]}" >&2; exit 1; }
echo "ensure-python: installing ${pkgs[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${pkgs[@]}" >&2 || { apt-get update -qq >&2 && apt-get install -y -qq "${pkgs[@]}" >&2; }
