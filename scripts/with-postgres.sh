#!/usr/bin/env bash
# with-postgres.sh CMD [ARG...]: run CMD with fencer's test PostgreSQL up
# (scripts/ensure-postgres.sh, which needs root and may install it with apt),
# with FENCER_TEST_PG_DSN and FENCER_TEST_PG_RESTART in its environment.
#
# Afterwards, pass or fail, and on Ctrl-C, the cluster is stopped again if a
# test run started it and no other test run still uses it: every run holds a
# shared lock on $FENCER_PG_LOCK while it runs, and only a run that can take
# it exclusively at the end stops the cluster. A cluster that was already
# running when no test run had started it is left running.
set -euo pipefail
cd "$(dirname "$0")/.."

lock=${FENCER_PG_LOCK:-/tmp/fencer-test-postgres.lock}
started=$lock.started # exists while a cluster started by a test run is up

stop() {
	status=$?
	if flock -x -n 9 && [[ -e $started ]]; then
		echo "with-postgres: stopping the PostgreSQL cluster the tests started" >&2
		read -r version cluster <"$started"
		pg_ctlcluster "$version" "$cluster" stop >&2 || true
		rm -f "$started"
	fi
	exit "$status"
}

exec 8>>"$lock.start" 9>>"$lock"
flock -x 8 # one run at a time checks and starts the cluster
flock -s 9 # the claim on the cluster, held until the end
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The lock fds are closed for every child: a PostgreSQL server started or
# restarted underneath would otherwise hold the locks for as long as it runs.
pgenv=$(FENCER_PG_STARTED_MARKER=$started scripts/ensure-postgres.sh 8>&- 9>&-)
eval "$pgenv"
flock -u 8

"$@" 8>&- 9>&-
