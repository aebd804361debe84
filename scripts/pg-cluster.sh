#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of the store's PostgreSQL
# backend (docs/fleet.md, "Testing"):
#
#   bash scripts/pg-cluster.sh install      # apt-get install postgresql when missing (root only)
#   bash scripts/pg-cluster.sh start        # prints the variables below, one KEY=VALUE a line
#   bash scripts/pg-cluster.sh env [DIR]    # prints them again
#   bash scripts/pg-cluster.sh stop [DIR]   # stops it, removes DIR, checks no process is left
#
# `start` makes a temporary directory (DIR), runs initdb there with the newest
# /usr/lib/postgresql/*/bin, and starts the server as an unprivileged user (as
# root: the system user gatehost-pg, made if missing, through runuser; else
# the current user), listening on 127.0.0.1 only, on a free port (another is
# tried when the one drawn is taken), its socket directory inside DIR,
# scram-sha-256 authentication with a random password and fsync on (the tests
# kill things: durability is never weakened to go faster). It prints, and
# writes to DIR/env:
#
#   GATEHOST_TEST_PG_URL            postgres://gatehost@127.0.0.1:PORT/postgres (no password in it)
#   GATEHOST_TEST_PG_PASSWORD_FILE  DIR/password (mode 0600, owned by whoever ran start)
#   GATEHOST_TEST_PG_DATA           the data directory
#   GATEHOST_TEST_PG_CTL            an executable running pg_ctl on this cluster as its user, with -D and
#                                   -l set: "$GATEHOST_TEST_PG_CTL" restart -m fast|immediate
#   GATEHOST_TEST_PG_DIR            DIR (what stop removes)
#
# `stop` (DIR, else $GATEHOST_TEST_PG_DIR) stops the server (-m fast, then
# -m immediate if that hangs, then SIGKILL), checks that none of its
# processes is left, and removes DIR (only a directory start made: it holds
# a marker file). Without PostgreSQL installed, `start` exits 1 with one line.
set -euo pipefail

PG_USER_SYSTEM=gatehost-pg
SUPERUSER=gatehost
MARKER=.gatehost-pg-cluster

die() {
    echo "pg-cluster: $*" >&2
    exit 1
}

# The newest installed PostgreSQL's bin directory, or nothing.
pg_bin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1) || true
    [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"
}

# Runs a command as the cluster's user, from / (the user may not reach the
# caller's directory).
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        (cd / && runuser -u "$PG_USER_SYSTEM" -- "$@")
    else
        (cd / && "$@")
    fi
}

cmd_install() {
    if [ -n "$(pg_bin)" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        die "PostgreSQL is not installed; install Debian's postgresql (apt-get install postgresql) as root"
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends postgresql >/dev/null
    [ -n "$(pg_bin)" ] || die "apt-get installed postgresql but no /usr/lib/postgresql/*/bin/initdb is there"
}

cmd_start() {
    local bin
    bin=$(pg_bin) || true
    [ -n "$bin" ] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql, or: bash scripts/pg-cluster.sh install"
    local owner
    if [ "$(id -u)" = 0 ]; then
        if ! id -u "$PG_USER_SYSTEM" >/dev/null 2>&1; then
            useradd --system --user-group --no-create-home --home-dir /nonexistent \
                --shell /usr/sbin/nologin "$PG_USER_SYSTEM" 2>/dev/null ||
                id -u "$PG_USER_SYSTEM" >/dev/null 2>&1 ||
                die "cannot make the system user $PG_USER_SYSTEM"
        fi
        owner=$PG_USER_SYSTEM
    else
        owner=$(id -un)
    fi

    # Global: the trap below reads them after this function has returned.
    START_FAILED=1
    START_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gatehost-pg.XXXXXX")
    local dir=$START_DIR
    case "$dir" in *[[:space:]]*) rm -rf "$dir"; die "the temporary directory $dir holds a space: set TMPDIR" ;; esac
    : >"$dir/$MARKER"
    # The cluster's user passes through DIR (no listing) to its own data and run directories.
    chmod 0711 "$dir"
    install -d -m 0700 -o "$owner" "$dir/data"
    install -d -m 0755 -o "$owner" "$dir/run"
    # Anything failing from here removes DIR (and stops a server it started).
    trap '[ "$START_FAILED" = 0 ] || cmd_stop "$START_DIR" >/dev/null 2>&1 || true' EXIT

    # The password: random, readable by the caller only; initdb reads a copy
    # the cluster's user owns, removed at once.
    local password
    password=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    (umask 077 && printf '%s\n' "$password" >"$dir/password")
    (umask 077 && printf '%s\n' "$password" >"$dir/run/pwfile")
    chown "$owner" "$dir/run/pwfile"
    as_pg "$bin/initdb" -D "$dir/data" --username="$SUPERUSER" --pwfile="$dir/run/pwfile" \
        --auth=scram-sha-256 --encoding=UTF8 --no-locale >"$dir/run/initdb.log" 2>&1 ||
        die "initdb failed: $(tail -n 3 "$dir/run/initdb.log" | tr '\n' ' ')"
    rm -f "$dir/run/pwfile"

    # pg_ctl as the cluster's user on this cluster, for the tests' restarts.
    cat >"$dir/pg_ctl" <<EOF
#!/bin/sh
# pg_ctl on the cluster in $dir, as $owner (scripts/pg-cluster.sh).
cd / || exit 1
$( [ "$(id -u)" = 0 ] && printf 'exec runuser -u %s -- ' "$PG_USER_SYSTEM" || printf 'exec ' )"$bin/pg_ctl" -D "$dir/data" -l "$dir/run/postgres.log" "\$@"
EOF
    chmod 0755 "$dir/pg_ctl"

    # Settings in a file of their own (kept by a restart through pg_ctl).
    echo "include = 'gatehost.conf'" >>"$dir/data/postgresql.conf"
    local port tries=0
    while :; do
        tries=$((tries + 1))
        port=$((20000 + RANDOM % 40000))
        cat >"$dir/data/gatehost.conf" <<EOF
# scripts/pg-cluster.sh: loopback only, the socket in the cluster's directory, durable.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir/run'
unix_socket_permissions = 0700
password_encryption = 'scram-sha-256'
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 300
EOF
        chown "$owner" "$dir/data/gatehost.conf"
        rm -f "$dir/run/postgres.log"
        if "$dir/pg_ctl" -w -t 60 start >/dev/null 2>&1; then
            break
        fi
        if [ "$tries" -lt 10 ] && grep -q 'Address already in use' "$dir/run/postgres.log" 2>/dev/null; then
            continue
        fi
        die "the server did not start: $(tail -n 3 "$dir/run/postgres.log" 2>/dev/null | tr '\n' ' ')"
    done

    cat >"$dir/env" <<EOF
GATEHOST_TEST_PG_URL=postgres://$SUPERUSER@127.0.0.1:$port/postgres
GATEHOST_TEST_PG_PASSWORD_FILE=$dir/password
GATEHOST_TEST_PG_DATA=$dir/data
GATEHOST_TEST_PG_CTL=$dir/pg_ctl
GATEHOST_TEST_PG_DIR=$dir
EOF
    START_FAILED=0
    cat "$dir/env"
}

# DIR from the argument, else $GATEHOST_TEST_PG_DIR; only a directory start made.
cluster_dir() {
    local dir=${1:-${GATEHOST_TEST_PG_DIR:-}}
    [ -n "$dir" ] || die "which cluster? pass its directory (or set GATEHOST_TEST_PG_DIR)"
    [ -f "$dir/$MARKER" ] || die "$dir is not a directory scripts/pg-cluster.sh start made"
    echo "$dir"
}

cmd_env() {
    local dir
    dir=$(cluster_dir "${1:-}")
    cat "$dir/env"
}

# The server's pid and its children's, while it runs.
server_pids() {
    local pidfile=$1/data/postmaster.pid pid
    [ -f "$pidfile" ] || return 0
    pid=$(head -n 1 "$pidfile")
    case "$pid" in '' | *[!0-9]*) return 0 ;; esac
    if [ -d "/proc/$pid" ]; then
        echo "$pid"
        ps -o pid= --ppid "$pid" 2>/dev/null | tr -d ' ' || true
    fi
}

cmd_stop() {
    local dir
    dir=$(cluster_dir "${1:-}")
    local pids
    pids=$(server_pids "$dir")
    if [ -n "$pids" ]; then
        "$dir/pg_ctl" -w -t 30 stop -m fast >/dev/null 2>&1 ||
            "$dir/pg_ctl" -w -t 30 stop -m immediate >/dev/null 2>&1 || true
    fi
    local p left=
    for p in $pids; do
        if [ -d "/proc/$p" ]; then
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    for _ in $(seq 1 50); do
        left=
        for p in $pids; do
            [ -d "/proc/$p" ] && left="$left $p"
        done
        [ -z "$left" ] && break
        sleep 0.1
    done
    [ -z "$left" ] || die "processes of the cluster in $dir are still running:$left"
    rm -rf "$dir"
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    env) cmd_env "${2:-}" ;;
    stop) cmd_stop "${2:-}" ;;
    *) die "usage: pg-cluster.sh install | start | env [DIR] | stop [DIR]" ;;
esac
