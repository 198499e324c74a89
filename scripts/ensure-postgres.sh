#!/usr/bin/env bash
# ensure-postgres.sh: make sure a local PostgreSQL cluster for fencer's
# pgfence tests is running, then print shell lines for eval:
#
#   export FENCER_TEST_PG_DSN=...
#   export FENCER_TEST_PG_RESTART='...'   how to restart it (durability test)
#   export FENCER_TEST_PG_STOP='...'      how to stop it again
#   export FENCER_TEST_PG_STARTED=0|1     whether this call started it
#
# Usage: eval "$(scripts/ensure-postgres.sh)"
# make test uses scripts/with-postgres.sh, which also stops the cluster
# again when the tests are done.
#
# It uses a dedicated Debian cluster (pg_createcluster), named "fencer" by
# default, so it never touches the machine's "main" cluster. The cluster
# listens on 127.0.0.1 only. It installs the postgresql package when the
# server binaries are missing (root on Debian/Ubuntu), and is idempotent:
# when the cluster is already up it only checks the role and database.
# All diagnostics go to stderr; stdout carries only the export lines.
#
# Environment (all optional):
#   FENCER_PG_CLUSTER  cluster name          (default fencer)
#   FENCER_PG_PORT     port for a new cluster (default 55432, or next free)
#   FENCER_PG_DB       database              (default fencer_test)
#   FENCER_PG_USER     role                  (default fencer_test)
#   FENCER_PG_PASSWORD password              (default fencer_test; test-only)
#   FENCER_PG_STARTED_MARKER  a file written ("VERSION CLUSTER") just before
#                      starting the cluster, so that with-postgres.sh can stop
#                      it again even when interrupted while it starts
set -euo pipefail

cluster=${FENCER_PG_CLUSTER:-fencer}
want_port=${FENCER_PG_PORT:-55432}
db=${FENCER_PG_DB:-fencer_test}
user=${FENCER_PG_USER:-fencer_test}
password=${FENCER_PG_PASSWORD:-fencer_test}

log() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Names go into SQL and a DSN unquoted, so keep them boring.
for name in "$cluster" "$db" "$user"; do
	[[ $name =~ ^[a-z_][a-z0-9_]*$ ]] || die "invalid name: $name"
done
[[ $password =~ ^[A-Za-z0-9_.-]+$ ]] || die "password must match [A-Za-z0-9_.-]+"

[[ $(id -u) -eq 0 ]] || die "must run as root (uses pg_createcluster and runs psql as postgres)"

server_version() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n1) || true
	[[ -n $d ]] || return 1
	basename "$(dirname "$(dirname "$d")")"
}

if ! server_version >/dev/null || ! command -v pg_createcluster >/dev/null; then
	command -v apt-get >/dev/null || die "postgres server missing and apt-get not available"
	log "installing postgresql with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
fi
version=$(server_version) || die "no postgres server binaries under /usr/lib/postgresql"

port_in_use() {
	# ss is in iproute2, which a minimal image may lack; fall back to bash's /dev/tcp.
	if command -v ss >/dev/null; then
		ss -Htln "sport = :$1" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

if ! pg_lsclusters -h "$version" "$cluster" >/dev/null 2>&1; then
	port=$want_port
	while port_in_use "$port"; do
		port=$((port + 1))
		((port < want_port + 100)) || die "no free port in $want_port..$port"
	done
	log "creating cluster $version/$cluster on 127.0.0.1:$port"
	pg_createcluster "$version" "$cluster" -p "$port" -- --auth-local=peer --auth-host=scram-sha-256 >&2
	# Listen on loopback only; fsync stays on (the default) because the
	# restart test is about durability.
	conf=/etc/postgresql/$version/$cluster/postgresql.conf
	sed -i "s/^#\?listen_addresses *=.*/listen_addresses = '127.0.0.1'/" "$conf"
	grep -q "^listen_addresses = '127.0.0.1'" "$conf" || die "could not set listen_addresses in $conf"
fi

# pg_lsclusters -h: version cluster port status owner datadir logfile
read -r _ _ port status _ <<<"$(pg_lsclusters -h "$version" "$cluster")"
started=0
if [[ $status != online* ]]; then
	log "starting cluster $version/$cluster"
	started=1
	if [[ -n ${FENCER_PG_STARTED_MARKER:-} ]]; then
		echo "$version $cluster" >"$FENCER_PG_STARTED_MARKER"
	fi
	pg_ctlcluster "$version" "$cluster" start >&2
fi

# pg_ctlcluster returns once postmaster is up, but poll anyway: under
# systemd the start is asynchronous.
deadline=$((SECONDS + 60))
until pg_isready -q -h 127.0.0.1 -p "$port"; do
	((SECONDS < deadline)) || die "cluster $version/$cluster not ready on port $port after 60s"
	sleep 0.2
done

psql_postgres() {
	runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres "$@"
}
psql_postgres >&2 <<SQL
SELECT format('CREATE ROLE %I LOGIN', '$user')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$user') \gexec
ALTER ROLE $user WITH LOGIN PASSWORD '$password';
SELECT format('CREATE DATABASE %I OWNER %I', '$db', '$user')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$db') \gexec
SQL

log "ready: $version/$cluster on 127.0.0.1:$port, database $db"
printf "export FENCER_TEST_PG_DSN='postgres://%s:%s@127.0.0.1:%s/%s?sslmode=disable'\n" "$user" "$password" "$port" "$db"
printf "export FENCER_TEST_PG_RESTART='pg_ctlcluster %s %s restart'\n" "$version" "$cluster"
printf "export FENCER_TEST_PG_STOP='pg_ctlcluster %s %s stop'\n" "$version" "$cluster"
printf "export FENCER_TEST_PG_STARTED=%s\n" "$started"
