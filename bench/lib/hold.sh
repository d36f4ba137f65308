# Shared by the server-side benchmarks that hold the xmin horizon (bench/held_xmin.sh,
# bench/vacuum_held.sh): sourced; psql reaches the benchmark's cluster through libpq's environment.
# The caller's `holder` is the holding psql's pid ("" when nothing is held).

hold() {  # a session that keeps one snapshot (and so the xmin horizon) until released
  PGAPPNAME=fy_held_xmin_holder psql -X -q -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
    -c "SELECT pg_catalog.txid_current()" -c "SELECT pg_catalog.pg_sleep(86400)" >/dev/null 2>&1 &
  holder=$!
  sleep 1
}
# Ends the holder's backend: a backend in pg_sleep does not notice its client is gone, so killing
# psql alone would leave the snapshot held into the next run.
release() {
  psql -X -q -At -c "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity
                      WHERE application_name = 'fy_held_xmin_holder'" >/dev/null
  [ -n "$holder" ] && { kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; }
  holder=""
  for _ in $(seq 100); do
    [ "$(psql -X -q -At -c "SELECT count(*) FROM pg_catalog.pg_stat_activity
                             WHERE application_name = 'fy_held_xmin_holder'")" = 0 ] && return
    sleep 0.1
  done
  echo "the holder's backend did not end" >&2
  exit 1
}
