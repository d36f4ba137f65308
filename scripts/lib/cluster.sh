# Throwaway PostgreSQL 15 cluster for tests: a temp dir, its own port and socket, run by an
# unprivileged OS user (initdb refuses root). Source this file, then cluster_start / cluster_stop.
# Exports PGHOST, PGPORT, PGUSER, PGDATABASE and FORGEYARD_TEST_PG_URL.
# The server also listens on 127.0.0.1 at the same port (FORGEYARD_TEST_PG_TCP_PORT), for the
# fault suite's TCP proxy; CLUSTER_TCP=0 turns that off.

PG_BIN=${PG_BIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
[ -x "$PG_BIN/initdb" ] || PG_BIN=/usr/lib/postgresql/15/bin

cluster_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$CLUSTER_OWNER" -- "$@"; else "$@"; fi
}

# The unprivileged user servers run as: forgeyard-test, created if missing, when run as root.
cluster_owner_init() {
  if [ "$(id -u)" -eq 0 ]; then
    CLUSTER_OWNER=forgeyard-test
    id -u "$CLUSTER_OWNER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$CLUSTER_OWNER"
  else
    CLUSTER_OWNER=$(id -un)
  fi
}

cluster_start() {
  CLUSTER_DIR=$(mktemp -d -t forgeyard-pg.XXXXXX)
  cluster_owner_init
  chown "$CLUSTER_OWNER" "$CLUSTER_DIR"
  chmod 755 "$CLUSTER_DIR"
  mkdir -p "$CLUSTER_DIR/socket" && chown "$CLUSTER_OWNER" "$CLUSTER_DIR/socket"
  # A free port: the first one from a random start that nothing listens on.
  local port=$((20000 + RANDOM % 20000))
  while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
  CLUSTER_PORT=$port
  export CLUSTER_DIR CLUSTER_OWNER CLUSTER_PORT
  cluster_as_owner "$PG_BIN/initdb" -D "$CLUSTER_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$CLUSTER_DIR/initdb.log" 2>&1 \
    || { cat "$CLUSTER_DIR/initdb.log"; return 1; }
  cat >>"$CLUSTER_DIR/data/postgresql.conf" <<CONF
listen_addresses = '$([ "${CLUSTER_TCP:-1}" = 0 ] || echo 127.0.0.1)'
port = $CLUSTER_PORT
unix_socket_directories = '$CLUSTER_DIR/socket'
max_connections = 100
fsync = off
shared_buffers = 128MB
log_min_messages = warning
# Statement counts per call, nested ones too (regress/queue_direct.sql: the hot paths run none).
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 20000
CONF
  cluster_pg_ctl start
  export PGHOST="$CLUSTER_DIR/socket" PGPORT="$CLUSTER_PORT" PGUSER=postgres PGDATABASE=forgeyard_test
  "$PG_BIN/createdb" forgeyard_test
  export FORGEYARD_TEST_PG_URL="postgresql://postgres@/forgeyard_test?host=$CLUSTER_DIR/socket&port=$CLUSTER_PORT"
  [ "${CLUSTER_TCP:-1}" = 0 ] || export FORGEYARD_TEST_PG_TCP_PORT=$CLUSTER_PORT
}

# A hot standby of the cluster, streaming from it (pg_basebackup -R), on its own port and socket:
# the replica of the read-class tests. Exports FORGEYARD_TEST_PG_REPLICA_URL. It streams through a
# replication slot: the suites restart the primary and kill its backends, and without a slot a
# checkpoint while the standby reconnects may recycle WAL it has not received, which stops it for
# good. (One run's standby stopped replaying before the slot; why was not established.)
standby_start() {
  STANDBY_DIR=$CLUSTER_DIR/standby
  mkdir -p "$STANDBY_DIR/socket" && chown -R "$CLUSTER_OWNER" "$STANDBY_DIR"
  local port=$((CLUSTER_PORT + 2))
  while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
  cluster_as_owner "$PG_BIN/pg_basebackup" -h "$CLUSTER_DIR/socket" -p "$CLUSTER_PORT" -U postgres \
    -D "$STANDBY_DIR/data" -R -X stream -C -S forgeyard_standby -c fast >"$STANDBY_DIR/basebackup.log" 2>&1 \
    || { cat "$STANDBY_DIR/basebackup.log"; return 1; }
  cat >>"$STANDBY_DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
port = $port
unix_socket_directories = '$STANDBY_DIR/socket'
hot_standby = on
CONF
  cluster_as_owner "$PG_BIN/pg_ctl" -D "$STANDBY_DIR/data" -l "$STANDBY_DIR/server.log" -w -t 60 start >/dev/null \
    || { tail -20 "$STANDBY_DIR/server.log"; return 1; }
  export STANDBY_DIR
  export FORGEYARD_TEST_PG_REPLICA_URL="postgresql://postgres@/forgeyard_test?host=$STANDBY_DIR/socket&port=$port"
}

cluster_pg_ctl() {
  cluster_as_owner "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w -t 60 "$@" >/dev/null
}

# PgBouncer in transaction mode in front of the cluster (Debian's 1.18: no prepared statements
# there). Exports FORGEYARD_TEST_PGBOUNCER_URL.
bouncer_start() {
  local port=$((CLUSTER_PORT + 1))
  while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
  mkdir -p "$CLUSTER_DIR/bouncer"
  printf '"postgres" ""\n"fy_owner" ""\n' >"$CLUSTER_DIR/bouncer/users.txt"
  cat >"$CLUSTER_DIR/bouncer/pgbouncer.ini" <<INI
[databases]
forgeyard_test = host=$CLUSTER_DIR/socket port=$CLUSTER_PORT dbname=forgeyard_test
forgeyard_neon = host=$CLUSTER_DIR/socket port=$CLUSTER_PORT dbname=forgeyard_neon
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $CLUSTER_DIR/bouncer
auth_type = trust
auth_file = $CLUSTER_DIR/bouncer/users.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
logfile = $CLUSTER_DIR/bouncer/pgbouncer.log
pidfile = $CLUSTER_DIR/bouncer/pgbouncer.pid
INI
  chown -R "$CLUSTER_OWNER" "$CLUSTER_DIR/bouncer"
  cluster_as_owner pgbouncer -d "$CLUSTER_DIR/bouncer/pgbouncer.ini" || return 1
  for _ in $(seq 50); do [ -S "$CLUSTER_DIR/bouncer/.s.PGSQL.$port" ] && break; sleep 0.1; done
  export FORGEYARD_TEST_PGBOUNCER_URL="postgresql://postgres@/forgeyard_test?host=$CLUSTER_DIR/bouncer&port=$port"
}

bouncer_stop() {
  local pidfile="${CLUSTER_DIR:-}/bouncer/pgbouncer.pid"
  [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  return 0
}

# With CLUSTER_LOGS_TO set (a directory), the servers' logs are copied there first.
cluster_stop() {
  [ -n "${CLUSTER_DIR:-}" ] || return 0
  if [ -n "${CLUSTER_LOGS_TO:-}" ]; then
    cp "$CLUSTER_DIR/server.log" "$CLUSTER_LOGS_TO/pg-primary.log" 2>/dev/null
    [ -z "${STANDBY_DIR:-}" ] || cp "$STANDBY_DIR/server.log" "$CLUSTER_LOGS_TO/pg-standby.log" 2>/dev/null
  fi
  bouncer_stop
  [ -z "${STANDBY_DIR:-}" ] || cluster_as_owner "$PG_BIN/pg_ctl" -D "$STANDBY_DIR/data" stop -m immediate >/dev/null 2>&1 || true
  STANDBY_DIR=""
  cluster_pg_ctl stop -m fast 2>/dev/null || true
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=""
}
