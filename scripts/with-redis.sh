#!/usr/bin/env bash
# with-redis.sh CMD [ARG...]: run CMD with a private redis-server up on
# 127.0.0.1 for the Redis fence tests (fence/redisfence, the Python client's
# fencer.redis_fence), with in CMD's environment:
#
#   FENCER_TEST_REDIS_ADDR     host:port of the server
#   FENCER_TEST_REDIS_RESTART  a command that kills the server with SIGKILL
#                              (no shutdown save) and starts it again on the
#                              same port and files: the durability test's crash
#
# The server is this run's own: its config, AOF and pid file live in a
# temporary directory, it persists with appendonly yes and appendfsync always
# (every acknowledged write is fsynced, which is what lets a mark survive the
# crash) and no RDB snapshots, and it is stopped and its directory removed
# when CMD ends, pass or fail, and on Ctrl-C. Concurrent runs each get their
# own server and port. Debian's redis-server is installed with apt-get when
# missing (root); its packaged service is kept from starting meanwhile by a
# policy-rc.d refusing service starts, unless the machine has one.
# Diagnostics go to stderr.
set -euo pipefail

log() { printf 'with-redis: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

(($# > 0)) || die "usage: with-redis.sh CMD [ARG...]"

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	command -v apt-get >/dev/null || die "redis-server missing and apt-get not available"
	[[ $(id -u) -eq 0 ]] || die "redis-server missing; must run as root to install it (apt-get install redis-server)"
	policy=/usr/sbin/policy-rc.d
	made_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		made_policy=1
	fi
	log "installing redis-server with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends redis-server >&2 ||
		{ apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends redis-server >&2; }
	[[ -z $made_policy ]] || rm -f "$policy"
	command -v redis-server >/dev/null || die "redis-server installed but not on PATH"
fi

port_in_use() {
	# ss is in iproute2, which a minimal image may lack; fall back to bash's /dev/tcp.
	if command -v ss >/dev/null; then
		ss -Htln "sport = :$1" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

dir=$(mktemp -d "${TMPDIR:-/tmp}/fencer-redis-XXXXXX")
stop() {
	status=$?
	if [[ -s $dir/redis.pid ]]; then
		pid=$(<"$dir/redis.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
	exit "$status"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=${FENCER_REDIS_PORT:-56379}
first=$port
while port_in_use "$port"; do
	port=$((port + 1))
	((port < first + 100)) || die "no free port in $first..$port"
done

cat >"$dir/redis.conf" <<EOF
bind 127.0.0.1
protected-mode yes
port $port
dir $dir
pidfile $dir/redis.pid
logfile $dir/redis.log
daemonize yes
appendonly yes
appendfsync always
save ""
maxmemory-policy noeviction
EOF

# start, and restart (a crash: SIGKILL, then the same config): both wait
# until the server answers, so the caller can use it at once.
cat >"$dir/restart" <<EOF
#!/usr/bin/env bash
set -euo pipefail
if [[ -s $dir/redis.pid ]]; then
	pid=\$(<$dir/redis.pid)
	kill -KILL "\$pid" 2>/dev/null || true
	while kill -0 "\$pid" 2>/dev/null; do sleep 0.02; done
	rm -f $dir/redis.pid
fi
redis-server $dir/redis.conf
for _ in \$(seq 500); do
	redis-cli -h 127.0.0.1 -p $port ping 2>/dev/null | grep -q PONG && exit 0
	sleep 0.02
done
echo "redis-server did not answer on 127.0.0.1:$port; log:" >&2
tail -n 20 $dir/redis.log >&2
exit 1
EOF
chmod 755 "$dir/restart"
"$dir/restart"
log "redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') on 127.0.0.1:$port (appendonly, appendfsync always) in $dir"

export FENCER_TEST_REDIS_ADDR=127.0.0.1:$port
export FENCER_TEST_REDIS_RESTART=$dir/restart
"$@"
