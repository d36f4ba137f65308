#!/usr/bin/env bash
# maintain() never waits for a ready lanes' segment (0.13.0; docs/queue-storage-design.md, "As
# built in 0.13.0") nor for a segment of the capacity counts (0.14.0), on both editions: a sealed segment whose entries are all consumed, held by an
# open transaction that read it, is skipped (its entries stay) and maintain() returns while that
# transaction is still open; a pass under REPEATABLE READ truncates nothing (its snapshot could
# miss an entry committed since); once the transaction ends, the next pass truncates it. Each
# edition in a database of its own: the C++ edition by CREATE EXTENSION, the PL/pgSQL edition's
# plain script by fy_owner (not superuser), whose maintain() runs as that role.
# Runs against the throwaway cluster of scripts/test.sh (PG* in the environment); the PL/pgSQL
# script must have been generated (make).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(cat VERSION)
plain=sql/gen/plpgsql/plain--$version.sql
[ -f "$plain" ] || { echo "no $plain: run make first" >&2; exit 1; }

q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$db" -c "$1"; }
as_owner() { psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" -c "$1"; }
fail() { echo "FAIL ($edition): $1"; exit 1; }
holder=

for edition in cpp plpgsql; do
  db=fy_lane_segments_$edition
  dropdb --if-exists "$db"
  if [ "$edition" = cpp ]; then
    owner=$(psql -X -At -d postgres -c "SELECT current_user")
    createdb "$db"
    q "CREATE EXTENSION forgeyard"
  else
    owner=fy_owner
    createdb -O "$owner" "$db"
    psql -X -q -v ON_ERROR_STOP=1 -U "$owner" -d "$db" -1 -f "$plain" >/dev/null
  fi
  # Three messages listed in segment 0, claimed and acked; a claim that finds nothing moves the
  # lane's cursor over them (autocommit: committed work). maintain() moves the open segment on.
  as_owner "SELECT forgeyard.queue_create('t', 'q')" >/dev/null
  for m in a b c; do as_owner "SELECT forgeyard.enqueue('t', 'q', '$m')" >/dev/null; done
  as_owner "SELECT count(forgeyard.ack('t', 'q', msg_id, claim_token)) FROM forgeyard.claim('t', 'q', 'w', 3)" >/dev/null
  [ "$(as_owner "SELECT count(*) FROM forgeyard.claim('t', 'q', 'w', 3)")" = 0 ] || fail "a message was left"
  [ "$(as_owner "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'lane_segments'")" = 0 ] ||
    fail "the open segment was truncated"
  [ "$(q "SELECT forgeyard.queue_lane_segment_open()")" = 1 ] || fail "the open segment did not move on"
  [ "$(q "SELECT count(*) FROM forgeyard.queue_lane_entries_0")" = 3 ] || fail "segment 0 lost its entries"

  # A transaction that read segment 0 stays open (it holds the table's ACCESS SHARE lock).
  psql -X -q -d "$db" -c "BEGIN; SELECT count(*) FROM forgeyard.queue_lane_entries_0; SELECT pg_sleep(600)" \
    >/dev/null 2>&1 &
  holder=$!
  for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
             WHERE l.relation = 'forgeyard.queue_lane_entries_0'::regclass AND a.query LIKE '%pg_sleep(600)%'")" = 1 ] && break
    sleep 0.1
  done
  # (A statement_timeout turns a maintain() that waited for the holder into a failure, not a hang.)
  rows=$(psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" \
    -c "SET statement_timeout = '20s'" -c "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'lane_segments'") ||
    fail "maintain() failed (or waited for the holder past its statement_timeout)"
  [ "$rows" = 0 ] || fail "maintain() truncated a segment an open transaction had read"
  [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%pg_sleep(600)%' AND state = 'active' AND pid <> pg_backend_pid()")" = 1 ] ||
    fail "the holder ended before maintain() returned"
  [ "$(q "SELECT count(*) FROM forgeyard.queue_lane_entries_0")" = 3 ] || fail "the skipped segment lost its entries"
  echo "ok - $edition: maintain() skips a segment an open transaction read, and returns while it is open"

  q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%pg_sleep(600)%'
       AND pid <> pg_backend_pid()" >/dev/null
  wait "$holder" 2>/dev/null || true
  holder=
  # Under a transaction snapshot the check could miss an entry committed since: no truncation.
  [ "$(psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" \
       -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
       -c "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'lane_segments'" -c "COMMIT")" = 0 ] ||
    fail "maintain() under REPEATABLE READ truncated a segment"
  [ "$(q "SELECT count(*) FROM forgeyard.queue_lane_entries_0")" = 3 ] || fail "segment 0 lost its entries"
  echo "ok - $edition: maintain() under REPEATABLE READ truncates nothing"
  [ "$(as_owner "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'lane_segments'")" = 3 ] ||
    fail "the next pass did not truncate segment 0"
  [ "$(q "SELECT count(*) FROM forgeyard.queue_lane_entries_0")" = 0 ] || fail "segment 0 is not empty"
  echo "ok - $edition: once that transaction ended, the next pass truncates the segment"

  # The counts' segments (0.14.0) likewise: at 2031-01-01 00:00:05 (period 192499200, segment 0)
  # an enqueue and an ack leave an admission row and a release row in segment 0 of their tables;
  # twenty seconds on, maintain() folds both, truncates the release segment and skips the
  # admission one, which an open transaction has read, without waiting for it.
  at() { psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" -c "SET forgeyard.now_override = '$1'" -c "$2"; }
  at '2031-01-01 00:00:05+00' "SELECT forgeyard.queue_create('t', 'u')" >/dev/null
  at '2031-01-01 00:00:05+00' "SELECT forgeyard.enqueue('t', 'u', 'x')" >/dev/null
  at '2031-01-01 00:00:05+00' "SELECT count(forgeyard.ack('t', 'u', msg_id, claim_token)) FROM forgeyard.claim('t', 'u', 'w')" >/dev/null
  # (Queue q's rows, of the real time, are folded first: the checks below count only u's.)
  at '2031-01-01 00:00:05+00' "SELECT forgeyard.maintain()" >/dev/null
  at '2031-01-01 00:00:05+00' "SELECT forgeyard.maintain()" >/dev/null
  [ "$(q "SELECT (SELECT count(*) FROM forgeyard.queue_admit_deltas_0 WHERE queue = 'u') || ' '
             || (SELECT count(*) FROM forgeyard.queue_release_deltas_0 WHERE queue = 'u') || ' '
             || (SELECT count(*) FROM forgeyard.queue_admit_deltas) || ' ' || (SELECT count(*) FROM forgeyard.queue_release_deltas)")" = "1 1 1 1" ] ||
    fail "the counts' rows are not in segment 0, or q's were not folded"
  psql -X -q -d "$db" -c "BEGIN; SELECT count(*) FROM forgeyard.queue_admit_deltas_0; SELECT pg_sleep(600)" \
    >/dev/null 2>&1 &
  holder=$!
  for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
             WHERE l.relation = 'forgeyard.queue_admit_deltas_0'::regclass AND a.query LIKE '%pg_sleep(600)%'")" = 1 ] && break
    sleep 0.1
  done
  rows=$(psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" -c "SET statement_timeout = '20s'" \
    -c "SET forgeyard.now_override = '2031-01-01 00:00:25+00'" \
    -c "SELECT string_agg(task || '=' || \"rows\", ' ' ORDER BY task) FROM forgeyard.maintain()
         WHERE task IN ('admit_deltas', 'release_deltas', 'usage_segments')") ||
    fail "maintain() failed (or waited for the holder of a counts' segment past its statement_timeout)"
  [ "$rows" = "admit_deltas=1 release_deltas=1 usage_segments=1" ] ||
    fail "maintain() with a counts' segment held: $rows (want both rows folded and one segment truncated)"
  [ "$(q "SELECT pg_relation_size('forgeyard.queue_release_deltas_0') || ' ' || (pg_relation_size('forgeyard.queue_admit_deltas_0') > 0)")" = "0 true" ] ||
    fail "the release segment was not truncated, or the held admission one was"
  echo "ok - $edition: maintain() truncates an emptied segment of the counts and skips one an open transaction read"
  q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%pg_sleep(600)%'
       AND pid <> pg_backend_pid()" >/dev/null
  wait "$holder" 2>/dev/null || true
  holder=
  [ "$(psql -X -q -v ON_ERROR_STOP=1 -At -U "$owner" -d "$db" -c "SET forgeyard.now_override = '2031-01-01 00:00:25+00'" \
       -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
       -c "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'usage_segments'" -c "COMMIT")" = 0 ] ||
    fail "maintain() under REPEATABLE READ truncated a counts' segment"
  [ "$(at '2031-01-01 00:00:25+00' "SELECT \"rows\" FROM forgeyard.maintain() WHERE task = 'usage_segments'")" = 1 ] ||
    fail "the next pass did not truncate the admission segment"
  [ "$(q "SELECT pg_relation_size('forgeyard.queue_admit_deltas_0')")" = 0 ] || fail "the admission segment has pages"
  [ "$(q "SELECT admitted_messages FROM forgeyard.queue_overview WHERE queue = 'u'")" = 0 ] || fail "the bound moved"
  echo "ok - $edition: once it ended, the next pass truncates it (none under REPEATABLE READ); the bound is unchanged"
  dropdb "$db"
done
