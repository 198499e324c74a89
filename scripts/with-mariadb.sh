#!/usr/bin/env bash
# with-mariadb.sh CMD [ARG...]: run CMD with a MariaDB server of its own up on
# 127.0.0.1 for fence/mysqlfence's tests, with in its environment
#
#   FENCER_TEST_MYSQL_DSN      go-sql-driver/mysql DSN of a test database
#   FENCER_TEST_MYSQL_RESTART  a command that restarts the server (same data)
#
# The server is Debian's mariadb-server (installed with apt-get when
# mariadbd is missing; needs root), its data directory a fresh temporary
# directory, so a run never touches a machine's own MariaDB and nothing
# survives it: pass or fail, and on Ctrl-C, the server is stopped and the
# directory removed. Each run has its own server, so concurrent runs need no
# lock, only different ports (the first free one from FENCER_MYSQL_PORT,
# default 53306). A first start (install-db included) takes a few seconds.
# Diagnostics go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

want_port=${FENCER_MYSQL_PORT:-53306}
db=fencer_test
user=fencer_test
password=fencer_test # test-only; the server listens on loopback only

log() { printf 'with-mariadb: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

(($# > 0)) || die "usage: $0 CMD [ARG...]"

if ! command -v mariadbd >/dev/null && [[ ! -x /usr/sbin/mariadbd ]]; then
	command -v apt-get >/dev/null || die "mariadbd missing and apt-get not available"
	[[ $(id -u) -eq 0 ]] || die "must run as root to install mariadb-server"
	log "installing mariadb-server with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	# --no-install-recommends: the tests need the server and its client,
	# not the Perl tooling, which doubles the download.
	pkgs=(mariadb-server mariadb-client)
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 ||
		{ apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2; }
fi
PATH=$PATH:/usr/sbin
# Run the server as the package's mysql user: mariadbd refuses to run as
# root without --user=root, and a root-owned server is one more root daemon.
run_as=mysql
id -u "$run_as" >/dev/null 2>&1 || run_as=$(id -un)

dir=$(mktemp -d /tmp/fencer-mariadb.XXXXXX)
chmod 0755 "$dir"
mkdir "$dir/data"
# The server writes its socket, pid file and log beside the data.
chown "$run_as" "$dir" "$dir/data"
sock=$dir/mysqld.sock
pidfile=$dir/mysqld.pid

port_in_use() {
	if command -v ss >/dev/null; then
		ss -Htln "sport = :$1" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}
port=$want_port
while port_in_use "$port"; do
	port=$((port + 1))
	((port < want_port + 100)) || die "no free port in $want_port..$port"
done

# The restart command the durability test runs, and the start this script
# runs: one file, so they cannot drift apart. innodb_flush_log_at_trx_commit=1
# and sync_binlog are the defaults that make a commit durable; they are
# spelled out because the restart test is about exactly that.
cat >"$dir/start.sh" <<EOF
#!/usr/bin/env bash
set -euo pipefail
mariadbd --no-defaults --user=$run_as --datadir=$dir/data --socket=$sock \\
	--pid-file=$pidfile --bind-address=127.0.0.1 --port=$port --skip-name-resolve \\
	--innodb-flush-log-at-trx-commit=1 --innodb-buffer-pool-size=64M \\
	--log-error=$dir/error.log >/dev/null 2>&1 </dev/null &
server=\$!
deadline=\$((SECONDS + 60))
until mariadb-admin --no-defaults -S $sock -u root ping >/dev/null 2>&1; do
	if ! kill -0 "\$server" 2>/dev/null || ((SECONDS >= deadline)); then
		echo "mariadb did not come up on 127.0.0.1:$port:" >&2
		tail -n 20 $dir/error.log >&2 || true
		exit 1
	fi
	sleep 0.1
done
EOF
cat >"$dir/stop.sh" <<EOF
#!/usr/bin/env bash
# mariadb-admin shutdown waits for a clean InnoDB shutdown; the kill is the
# fallback for a server that no longer answers.
mariadb-admin --no-defaults -S $sock -u root shutdown 2>/dev/null && exit 0
[[ -s $pidfile ]] && kill "\$(cat $pidfile)" 2>/dev/null
deadline=\$((SECONDS + 30))
while [[ -e $pidfile ]] && ((SECONDS < deadline)); do sleep 0.1; done
EOF
chmod +x "$dir/start.sh" "$dir/stop.sh"

cleanup() {
	status=$?
	# A reader of our output that has gone (| head) must not kill the
	# cleanup with SIGPIPE halfway and leave the server running.
	trap '' PIPE
	if [[ -e $pidfile ]]; then
		log "stopping the MariaDB server the tests started"
		"$dir/stop.sh" || true
	fi
	rm -rf "$dir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
mariadb-install-db --no-defaults --user="$run_as" --datadir="$dir/data" \
	--auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1 ||
	{ cat "$dir/install.log" >&2; die "mariadb-install-db failed"; }
"$dir/start.sh"
mariadb --no-defaults -S "$sock" -u root <<SQL
CREATE DATABASE IF NOT EXISTS $db;
CREATE USER IF NOT EXISTS '$user'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL ON $db.* TO '$user'@'127.0.0.1';
GRANT PROCESS ON *.* TO '$user'@'127.0.0.1';
SQL
log "ready in $((SECONDS - start))s: 127.0.0.1:$port, database $db, data in $dir"

export FENCER_TEST_MYSQL_DSN="$user:$password@tcp(127.0.0.1:$port)/$db"
export FENCER_TEST_MYSQL_RESTART="$dir/stop.sh && $dir/start.sh"
"$@"
