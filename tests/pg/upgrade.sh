#!/usr/bin/env bash
# Two paths to the current version must give one catalog: a fresh CREATE EXTENSION, which runs the
# full script sql/forgeyard--<default_version>.sql alone, and a database created at 0.1.0 and taken
# through every upgrade script with ALTER EXTENSION forgeyard UPDATE. tests/pg/catalog.sql prints
# both catalogs line by line (function definitions, tables, columns, indexes, constraints, triggers,
# views, sequences, types, reloptions, grants, initial privileges, comments, config-dump and
# membership), and they must be equal. A scratch copy then gets one deliberate change at a time,
# each of which the comparison must report, so a comparison that misses a kind of object fails.
# Data must survive the update: a database created at 0.1.0 with leases and access grants, and one
# created at the previous version (0.6.0) with a queue holding a message, are each updated; their
# old state survives, the new API works (also for roles granted before the update), and their
# catalog equals a fresh install with the same grant. Last, the audit log refuses a database that is
# not UTF8. Runs against the cluster of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CLUSTER_DIR:?run through scripts/test.sh}"

full=fy_upgrade_full
chain=fy_upgrade_chain
scratch=fy_upgrade_scratch
old=fy_upgrade_old
prev=fy_upgrade_prev
new=fy_upgrade_new
v070=fy_upgrade_070
dbs=("$full" "$chain" "$scratch" "$old" "$prev" "$new" "$v070" fy_latin1)
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
check() {  # check DB DESCRIPTION CONDITION
  if [ "$(q "$1" "SELECT ($3)::text")" != "true" ]; then echo "FAIL: $2"; exit 1; fi
  echo "ok - $2"
}
catalog() {  # catalog DB OUT
  # (A queue's ready-lane sequences, lane_<id> and lane_<id>_cursor, are its data, made by
  # queue_create and dropped with the queue: not the extension's catalog.)
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -f tests/pg/catalog.sql |
    grep -vE '(^|[^a-z_])lane_[0-9]+(_cursor)?([^a-z0-9_]|$)' >"$2"
}
same_catalog() {  # same_catalog DESCRIPTION EXPECTED ACTUAL
  if ! diff -u "$2" "$3"; then echo "FAIL: $1 (diff above: - $2, + $3)"; exit 1; fi
  echo "ok - $1 ($(wc -l <"$2") catalog lines compared)"
}
# Every DDL command of the extension scripts logs the extension's version at its start, which
# tells which scripts a CREATE or ALTER EXTENSION ran.
script_log() {  # script_log DB
  q "$1" "CREATE TABLE public.fy_script_log (n serial, version text);
          CREATE FUNCTION public.fy_log_script() RETURNS event_trigger LANGUAGE plpgsql AS \$\$
          BEGIN
            INSERT INTO public.fy_script_log (version) SELECT extversion FROM pg_extension WHERE extname = 'forgeyard';
          END \$\$;
          CREATE EVENT TRIGGER fy_log_script ON ddl_command_start EXECUTE FUNCTION public.fy_log_script()"
}
script_log_drop() {  # script_log_drop DB
  q "$1" "DROP EVENT TRIGGER fy_log_script; DROP FUNCTION public.fy_log_script(); DROP TABLE public.fy_script_log"
}
cleanup() {
  for db in "${dbs[@]}"; do dropdb --if-exists "$db"; done
  q postgres "DROP ROLE IF EXISTS fy_upgrade_app" >/dev/null
}
cleanup
out=$CLUSTER_DIR/upgrade
mkdir -p "$out"

latest=$(sed -n "s/^default_version = '\(.*\)'/\1/p" extension/forgeyard.control)
# The released steps in sql/, the current ones generated from sql/src into sql/gen/cpp.
steps=$(ls sql/forgeyard--*--*.sql sql/src/forgeyard--*--*.sql | wc -l)
installed="$(pg_config --sharedir)/extension/forgeyard--$latest.sql"
if ! cmp -s "sql/gen/cpp/forgeyard--$latest.sql" "$installed"; then
  echo "FAIL: the full script sql/gen/cpp/forgeyard--$latest.sql of the default version is missing or not installed"
  exit 1
fi
echo "ok - the full script of the default version $latest is installed"

# Path 1: a fresh install runs the full script alone.
createdb "$full"
script_log "$full"
q "$full" "CREATE EXTENSION forgeyard"
check "$full" "CREATE EXTENSION forgeyard ran one script, the full script of $latest" \
  "(SELECT count(*) > 50 AND bool_and(version = '$latest') FROM public.fy_script_log)"
script_log_drop "$full"

# Path 2: 0.1.0, then every upgrade script in turn.
createdb "$chain"
script_log "$chain"
q "$chain" "CREATE EXTENSION forgeyard VERSION '0.1.0'"
q "$chain" "ALTER EXTENSION forgeyard UPDATE"
check "$chain" "0.1.0 was updated to $latest through all $steps upgrade scripts" \
  "(SELECT count(DISTINCT version) = $steps + 1 AND bool_or(version = '0.1.0') AND bool_or(version = '$latest')
      FROM public.fy_script_log)
   AND (SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')"
script_log_drop "$chain"

catalog "$full" "$out/full.txt"
lines=$(wc -l <"$out/full.txt")
[ "$lines" -gt 1000 ] || { echo "FAIL: the catalog snapshot is suspiciously small ($lines lines)"; exit 1; }
catalog "$chain" "$out/chain.txt"
same_catalog "the full script and the upgrade chain give the same catalog" "$out/full.txt" "$out/chain.txt"

# The comparison bites: each change below, made in a transaction on a copy of the fresh install,
# must show up as a line of the diff that matches the pattern (diff marks a line of the fresh
# install that is gone with <, a new line with >).
createdb -T "$full" "$scratch"
catalog "$scratch" "$out/scratch.txt"
same_catalog "a copy of the fresh install gives the same catalog" "$out/full.txt" "$out/scratch.txt"
# All changes run in one session, each in a transaction rolled back after its catalog is printed.
bites=()
patterns=()
: >"$out/bites.sql"
bite() {  # bite DESCRIPTION DIFF-LINE-PATTERN SQL
  printf '\\o %s\nBEGIN;\n%s;\n\\i tests/pg/catalog.sql\nROLLBACK;\n' \
    "$out/changed-${#bites[@]}.txt" "$3" >>"$out/bites.sql"
  bites+=("$1")
  patterns+=("$2")
}
bite "a changed comment" "^> comment function forgeyard.lease_get\(text,text\): changed$" \
  "COMMENT ON FUNCTION forgeyard.lease_get(text, text) IS 'changed'"
bite "a dropped column comment" "^< comment column epoch of table forgeyard.leases: " \
  "COMMENT ON COLUMN forgeyard.leases.epoch IS NULL"
bite "a dropped grant" "^< grant function forgeyard.lease_get\(text,text\) to postgres EXECUTE" \
  "REVOKE EXECUTE ON FUNCTION forgeyard.lease_get(text, text) FROM postgres"
bite "a grant to PUBLIC on a table" "^> grant table forgeyard.leases to PUBLIC SELECT" \
  "GRANT SELECT ON forgeyard.leases TO PUBLIC"
bite "a grant on a column" "^> grant column tenant_id of table forgeyard.leases to PUBLIC SELECT" \
  "GRANT SELECT (tenant_id) ON forgeyard.leases TO PUBLIC"
bite "a grant on the schema" "^> grant schema forgeyard to PUBLIC USAGE" "GRANT USAGE ON SCHEMA forgeyard TO PUBLIC"
bite "a grant on a sequence" "^> grant sequence forgeyard.message_ids to PUBLIC USAGE" \
  "GRANT USAGE ON SEQUENCE forgeyard.message_ids TO PUBLIC"
bite "changed initial privileges" "^< init-privs table forgeyard.leases " \
  "DELETE FROM pg_init_privs WHERE classoid = 'pg_class'::regclass AND objoid = 'forgeyard.leases'::regclass"
bite "a changed function body" "^> function forgeyard.access_objects\(text\) .*ORDER BY c.object DESC" \
  "CREATE OR REPLACE FUNCTION forgeyard.access_objects(access text) RETURNS TABLE (privilege text, object text)
     LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
     AS \$\$ SELECT c.privilege, c.object FROM forgeyard.access_catalog c
             WHERE c.access OPERATOR(pg_catalog.=) \$1 ORDER BY c.object DESC \$\$"
bite "a changed library symbol" "^> function forgeyard.lease_get\(text,text\) .*fy_lease_acquire" \
  "CREATE OR REPLACE FUNCTION forgeyard.lease_get(tenant text, resource text)
     RETURNS TABLE (owner text, epoch bigint, acquired_at timestamptz, expires_at timestamptz, state text)
     LANGUAGE c VOLATILE SECURITY DEFINER ROWS 1 SET search_path = pg_catalog, pg_temp
     AS '\$libdir/forgeyard', 'fy_lease_acquire'"
bite "a changed argument default" "^> function forgeyard.lease_reap\(integer,text\) .*DEFAULT 7" \
  "CREATE OR REPLACE FUNCTION forgeyard.lease_reap(max_leases integer DEFAULT 7, tenant text DEFAULT NULL)
     RETURNS TABLE (tenant text, resource text, epoch bigint, holder text, expired_at timestamptz)
     LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
     AS '\$libdir/forgeyard', 'fy_lease_reap'"
bite "a changed volatility" "^> function forgeyard.now\(\) .*STABLE" "ALTER FUNCTION forgeyard.now() STABLE"
bite "a dropped setting" "^< function forgeyard.lease_get\(text,text\) .*search_path" \
  "ALTER FUNCTION forgeyard.lease_get(text, text) RESET search_path"
bite "a changed security" "^< function forgeyard.lease_get\(text,text\) .*SECURITY DEFINER" \
  "ALTER FUNCTION forgeyard.lease_get(text, text) SECURITY INVOKER"
bite "an extra function" "^> function forgeyard.extra\(\) " \
  "CREATE FUNCTION forgeyard.extra() RETURNS int LANGUAGE sql AS 'SELECT 1'"
bite "a changed column default" "^> column messages.attempt .* default=1 " \
  "ALTER TABLE forgeyard.messages ALTER COLUMN attempt SET DEFAULT 1"
bite "a changed NOT NULL" "^> column leases.released_at .* notnull=true " \
  "ALTER TABLE forgeyard.leases ALTER COLUMN released_at SET NOT NULL"
bite "a changed collation" "^> column idempotency_keys.scope .* collation=POSIX " \
  "ALTER TABLE forgeyard.idempotency_keys ALTER COLUMN scope TYPE text COLLATE \"POSIX\""
bite "a changed column type" "^> column inbox.consumer .* character varying\(100\) " \
  "ALTER TABLE forgeyard.inbox ALTER COLUMN consumer TYPE varchar(100)"
bite "a dropped index" "^< index CREATE INDEX inbox_accepted " "DROP INDEX forgeyard.inbox_accepted"
bite "a changed index predicate" "^> index CREATE INDEX messages_finished .*'acked'" \
  "DROP INDEX forgeyard.messages_finished;
   CREATE INDEX messages_finished ON forgeyard.messages (tenant_id, queue, msg_id) WHERE state = 'acked'"
bite "a changed constraint" "^> constraint queues queues_slots_check CHECK .*9" \
  "ALTER TABLE forgeyard.queues DROP CONSTRAINT queues_slots_check,
     ADD CONSTRAINT queues_slots_check CHECK (slots BETWEEN 1 AND 9)"
bite "a trigger no longer ENABLE ALWAYS" "^> trigger CREATE TRIGGER audit_events_no_change .* enabled=O$" \
  "ALTER TABLE forgeyard.audit_events ENABLE TRIGGER audit_events_no_change"
bite "a changed trigger" "^> trigger CREATE TRIGGER audit_events_no_change BEFORE DELETE ON " \
  "DROP TRIGGER audit_events_no_change ON forgeyard.audit_events;
   CREATE TRIGGER audit_events_no_change BEFORE DELETE ON forgeyard.audit_events
     FOR EACH ROW EXECUTE FUNCTION forgeyard.audit_append_only();
   ALTER TABLE forgeyard.audit_events ENABLE ALWAYS TRIGGER audit_events_no_change"
bite "a changed view" "^> view audit_status .*NULL::timestamp" \
  "CREATE OR REPLACE VIEW forgeyard.audit_status WITH (security_barrier) AS
     SELECT h.tenant_id, h.seq AS head_seq, h.hash AS head_hash, NULL::timestamptz AS last_recorded_at
       FROM forgeyard.audit_heads h"
bite "a view that is no longer security_barrier" "^< relation lease_status kind=v .*security_barrier=true" \
  "ALTER VIEW forgeyard.lease_status RESET (security_barrier)"
bite "a changed autovacuum setting" "^> relation leases kind=r .*autovacuum_vacuum_scale_factor=0.2" \
  "ALTER TABLE forgeyard.leases SET (autovacuum_vacuum_scale_factor = 0.2)"
bite "a changed TOAST setting" "^> relation messages kind=r .*toast_options=\{autovacuum_enabled=false\}" \
  "ALTER TABLE forgeyard.messages SET (toast.autovacuum_enabled = false)"
bite "a changed sequence" "^> sequence claim_tokens .* cache=10 " "ALTER SEQUENCE forgeyard.claim_tokens CACHE 10"
bite "an extra type" "^> type extra_kind kind=e " "CREATE TYPE forgeyard.extra_kind AS ENUM ('a')"
bite "a changed config-dump condition" "^> config-dump forgeyard.leases condition=WHERE false$" \
  "UPDATE pg_extension SET extcondition[array_position(extconfig, 'forgeyard.leases'::regclass::oid)] = 'WHERE false'
    WHERE extname = 'forgeyard'"
bite "a table dropped from the extension" "^< config-dump forgeyard.inbox " \
  "ALTER EXTENSION forgeyard DROP TABLE forgeyard.inbox"
bite "a changed access kind" "^< access-catalog usage EXECUTE FUNCTION forgeyard.lease_get\(text, text\)$" \
  "DELETE FROM forgeyard.access_catalog WHERE object = 'FUNCTION forgeyard.lease_get(text, text)'"
psql -X -q -At -v ON_ERROR_STOP=1 -d "$scratch" -f "$out/bites.sql" || { echo "FAIL: a deliberate change failed"; exit 1; }
for i in "${!bites[@]}"; do
  diff "$out/full.txt" "$out/changed-$i.txt" >"$out/changed.diff" || true
  if ! grep -qE -- "${patterns[$i]}" "$out/changed.diff"; then
    cat "$out/changed.diff"
    echo "FAIL: the catalog comparison misses ${bites[$i]} (no diff line matches '${patterns[$i]}'; diff above)"
    exit 1
  fi
done
echo "ok - the catalog comparison reports each of ${#bites[@]} deliberate changes"

# Data survives: from 0.1.0 with a lease and a role granted access.
q postgres "CREATE ROLE fy_upgrade_app"
createdb "$old"
q "$old" "CREATE EXTENSION forgeyard VERSION '0.1.0'"
q "$old" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
epoch=$(q "$old" "SELECT epoch FROM forgeyard.lease_acquire('t', 'r', 'a', '1 hour')")
check "$old" "starts at 0.1.0" "(SELECT extversion = '0.1.0' FROM pg_extension WHERE extname = 'forgeyard')"

q "$old" "ALTER EXTENSION forgeyard UPDATE"
check "$old" "updated to the default version $latest" "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')"
check "$old" "the lease taken before the update is still live with its epoch" \
  "(SELECT epoch = $epoch AND state = 'live' FROM forgeyard.lease_get('t', 'r'))"
check "$old" "a role granted before the update can call the new API" \
  "has_function_privilege('fy_upgrade_app', 'forgeyard.idem_begin(text,text,text,bytea,interval,interval)', 'EXECUTE')"
check "$old" "the new API works" \
  "(SELECT status = 'started' FROM forgeyard.idem_begin('t', 'scope', 'k', '\\x01'))"

# From the previous version: a queue's message survives, the audit log arrives append-only.
createdb "$prev"
q "$prev" "CREATE EXTENSION forgeyard VERSION '0.6.0'"
q "$prev" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
q "$prev" "SELECT forgeyard.queue_create('t', 'q')" >/dev/null
q "$prev" "SELECT forgeyard.enqueue('t', 'q', 'kept')" >/dev/null
q "$prev" "ALTER EXTENSION forgeyard UPDATE"
check "$prev" "0.6.0 updated to $latest" "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')"
check "$prev" "the message enqueued before the update is delivered after it" \
  "(SELECT payload = 'kept' FROM forgeyard.claim('t', 'q', 'c'))"
check "$prev" "a role granted before the update can append audit events" \
  "has_function_privilege('fy_upgrade_app', 'forgeyard.audit_append(text,text,text,text,jsonb,bytea,text,timestamptz,uuid)', 'EXECUTE')"
check "$prev" "a role granted before the update can start and claim workflow runs" \
  "has_function_privilege('fy_upgrade_app', 'forgeyard.workflow_claim(text,text,text[],integer,interval)', 'EXECUTE')"
q "$prev" "SELECT forgeyard.workflow_start('t', 'w', 1, 'k')" >/dev/null
check "$prev" "a workflow run starts and is claimed after the update" \
  "(SELECT count(*) = 1 FROM forgeyard.workflow_claim('t', 'c', ARRAY['w@1']))"
check "$prev" "the audit chain starts at seq 1 and verifies" \
  "(SELECT seq = 1 FROM forgeyard.audit_append('t', 'a', 'upgrade', 'r')) AND (SELECT ok FROM forgeyard.audit_verify('t'))"
check "$prev" "the store's timeline is the one its WAL is written on" \
  "(SELECT timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int FROM forgeyard.current_store_identity())"
check "$prev" "the audit log is append-only after the update" \
  "(SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = 'forgeyard.audit_events'::regclass AND tgenabled = 'A')"

# From 0.7.0, before release deltas: this library's queue calls run on the 0.7.0 catalog as they
# did there (an ack waits for the release row), and after the update the counts carry on exactly.
createdb "$v070"
q "$v070" "CREATE EXTENSION forgeyard VERSION '0.7.0'"
q "$v070" "SELECT forgeyard.queue_create('t', 'q'); SELECT count(forgeyard.enqueue('t', 'q', 'm')) FROM generate_series(1, 3)" >/dev/null
q "$v070" "SELECT forgeyard.ack('t', 'q', msg_id, claim_token) FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
q "$v070" "SELECT forgeyard.resource_limit('t', 'r', '{\"max_in_flight\": 10}');
           SELECT forgeyard.queue_create('t', 'qr'); SELECT forgeyard.enqueue('t', 'qr', 'm', resource => 'r')" >/dev/null
q "$v070" "SELECT forgeyard.ack('t', 'qr', msg_id, claim_token) FROM forgeyard.claim('t', 'qr', 'c')" >/dev/null
check "$v070" "on the 0.7.0 catalog an enqueue, an ack and a resource's outcome count exactly" \
  "(SELECT admitted_messages = 2 FROM forgeyard.queue_overview WHERE tenant_id = 't' AND queue = 'q')
   AND (SELECT in_flight = 0 FROM forgeyard.flow_state WHERE tenant_id = 't' AND kind = 'resource_limit')
   AND to_regclass('forgeyard.queue_release_deltas') IS NULL AND to_regclass('forgeyard.flow_outcome_deltas') IS NULL"
q "$v070" "ALTER EXTENSION forgeyard UPDATE"
q "$v070" "BEGIN ISOLATION LEVEL REPEATABLE READ;
           SELECT forgeyard.ack('t', 'q', msg_id, claim_token) FROM forgeyard.claim('t', 'q', 'c');
           COMMIT" >/dev/null
check "$v070" "0.7.0 updated to $latest: an ack gives room back through a delta, counted with the release rows" \
  "(SELECT admitted_messages = 1 FROM forgeyard.queue_overview WHERE tenant_id = 't' AND queue = 'q')
   AND (SELECT count(*) = 1 FROM forgeyard.queue_release_deltas)"

# From 0.9.0, before ready lanes (F17): messages ready, in flight, delayed and dead on the 0.9.0
# catalog (this library's queue calls run there as they did), then the update. The claim held
# across it is acked with its token, the others come through, and maintain() gives the queue its
# lanes: a message enqueued after that is listed (queue_lanes) and claimed from its lane.
v090=fy_upgrade_090
dropdb --if-exists "$v090"
createdb "$v090"
q "$v090" "CREATE EXTENSION forgeyard VERSION '0.9.0'"
q "$v090" "SELECT forgeyard.queue_create('t', 'q', '{\"max_attempts\": 1}');
           SELECT forgeyard.enqueue('t', 'q', 'dead'); SELECT forgeyard.enqueue('t', 'q', 'inflight');
           SELECT forgeyard.enqueue('t', 'q', 'ready'); SELECT forgeyard.enqueue('t', 'q', 'delayed', delay => '1 hour')" >/dev/null
q "$v090" "SELECT forgeyard.nack('t', 'q', msg_id, claim_token, 'boom', true) FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
held=$(q "$v090" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
check "$v090" "on the 0.9.0 catalog: one message dead, one in flight, one ready, one delayed" \
  "to_regclass('forgeyard.queue_lanes') IS NULL
   AND (SELECT count(*) = 4 FROM forgeyard.messages)
   AND (SELECT count(*) = 1 FROM forgeyard.messages WHERE state = 'dead')
   AND (SELECT payload = 'inflight' FROM forgeyard.messages WHERE msg_id = ${held% *})"
q "$v090" "ALTER EXTENSION forgeyard UPDATE"
q "$v090" "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
check "$v090" "0.9.0 updated to $latest: the claim held across the update is acked with its token" \
  "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')
   AND NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = ${held% *})"
check "$v090" "the ready message comes through, the delayed one waits, the dead letter is kept" \
  "(SELECT payload = 'ready' FROM forgeyard.claim('t', 'q', 'c'))
   AND (SELECT count(*) = 0 FROM forgeyard.claim('t', 'q', 'c'))
   AND (SELECT count(*) = 1 FROM forgeyard.dead_list('t', 'q'))"
q "$v090" "SELECT forgeyard.maintain()" >/dev/null
q "$v090" "SELECT forgeyard.enqueue('t', 'q', 'after')" >/dev/null
check "$v090" "maintain() gives the queue its lanes; a message enqueued after is listed and claimed" \
  "(SELECT lanes IS NOT NULL FROM forgeyard.queues WHERE queue = 'q')
   AND (SELECT ready_pos IS NOT NULL FROM forgeyard.messages WHERE payload = 'after')
   AND (SELECT count(*) = 1 FROM forgeyard.queue_lane_entries)
   AND (SELECT payload = 'after' FROM forgeyard.claim('t', 'q', 'c'))"
dropdb "$v090"

# From 0.10.0, before release generations (F17): on the 0.10.0 catalog this library's acks give
# room back as they did there (to the release row; a delta only under REPEATABLE READ), with
# messages dead, in flight, ready and delayed. The update folds the 0.10.0 delta, which has no
# generation, into the release row (the 0.14.0 step: the segments are by generation), the claim
# held across the update is acked with its token into a delta row of its generation, and
# maintain() a second later folds that one too: the bound counts every release once.
v0100=fy_upgrade_0100
dropdb --if-exists "$v0100"
createdb "$v0100"
q "$v0100" "CREATE EXTENSION forgeyard VERSION '0.10.0'"
q "$v0100" "SELECT forgeyard.queue_create('t', 'q', '{\"max_attempts\": 1}');
            SELECT forgeyard.enqueue('t', 'q', 'dead'); SELECT forgeyard.enqueue('t', 'q', 'acked');
            SELECT forgeyard.enqueue('t', 'q', 'acked-rr'); SELECT forgeyard.enqueue('t', 'q', 'inflight');
            SELECT forgeyard.enqueue('t', 'q', 'ready'); SELECT forgeyard.enqueue('t', 'q', 'delayed', delay => '1 hour')" >/dev/null
q "$v0100" "SELECT forgeyard.nack('t', 'q', msg_id, claim_token, 'boom', true) FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
q "$v0100" "SELECT forgeyard.ack('t', 'q', msg_id, claim_token) FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
q "$v0100" "BEGIN ISOLATION LEVEL REPEATABLE READ;
            SELECT forgeyard.ack('t', 'q', msg_id, claim_token) FROM forgeyard.claim('t', 'q', 'c');
            COMMIT" >/dev/null
held=$(q "$v0100" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
check "$v0100" "on the 0.10.0 catalog: an ack updates the release row, one under REPEATABLE READ adds a delta" \
  "(SELECT sum(released_messages) = 2 FROM forgeyard.queue_releases WHERE queue = 'q')
   AND (SELECT count(*) = 1 FROM forgeyard.queue_release_deltas)
   AND (SELECT admitted_messages = 3 FROM forgeyard.queue_overview WHERE queue = 'q')
   AND (SELECT payload = 'inflight' FROM forgeyard.messages WHERE msg_id = ${held% *})"
q "$v0100" "ALTER EXTENSION forgeyard UPDATE"
q "$v0100" "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
check "$v0100" "0.10.0 updated to $latest: the claim held across the update is acked with its token, into a delta row of its generation" \
  "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')
   AND NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = ${held% *})
   AND NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas WHERE gen IS NULL)
   AND (SELECT count(*) = 1 FROM forgeyard.queue_release_deltas WHERE gen > 0 AND released_messages = 1)
   AND (SELECT sum(released_messages) = 3 FROM forgeyard.queue_releases WHERE queue = 'q')
   AND (SELECT admitted_messages = 2 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0100" "SELECT set_config('forgeyard.now_override', (clock_timestamp() + interval '1 second')::text, false);
            SELECT forgeyard.maintain()" >/dev/null
check "$v0100" "maintain() folds the 0.10.0 delta and the new generation's into the release row; the ready message comes through, the delayed one waits, the dead letter is kept" \
  "(SELECT sum(released_messages) = 4 FROM forgeyard.queue_releases WHERE queue = 'q')
   AND NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas)
   AND (SELECT admitted_messages = 2 FROM forgeyard.queue_overview WHERE queue = 'q')
   AND (SELECT payload = 'ready' FROM forgeyard.claim('t', 'q', 'c'))
   AND (SELECT count(*) = 0 FROM forgeyard.claim('t', 'q', 'c'))
   AND (SELECT count(*) = 1 FROM forgeyard.dead_list('t', 'q'))"
dropdb "$v0100"

# From 0.11.1, before admission generations (F17): on the 0.11.1 catalog this library's producers
# add to the slot row as they did there. After the update the slot has no generation yet; the
# first producer makes one (the slot row keeps its count), a claim held across the update is acked
# with its token, and the bound counts both rows: one slot of 3 (the emergency class up to 3).
v0111=fy_upgrade_0111
dropdb --if-exists "$v0111"
createdb "$v0111"
q "$v0111" "CREATE EXTENSION forgeyard VERSION '0.11.1'"
q "$v0111" "SELECT forgeyard.queue_create('t', 'q', '{\"max_messages\": 3}');
            SELECT forgeyard.enqueue('t', 'q', 'inflight', priority => 'emergency');
            SELECT forgeyard.enqueue('t', 'q', 'ready', priority => 'emergency')" >/dev/null
held=$(q "$v0111" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
check "$v0111" "on the 0.11.1 catalog: a producer adds to the slot row" \
  "(SELECT admitted_messages = 2 FROM forgeyard.queue_slots WHERE queue = 'q')
   AND (SELECT admitted_messages = 2 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0111" "ALTER EXTENSION forgeyard UPDATE"
q "$v0111" "SELECT forgeyard.enqueue('t', 'q', 'after', priority => 'emergency')" >/dev/null
check "$v0111" "0.11.1 updated to $latest: the first producer makes the slot's generation row, the slot row keeps its count" \
  "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')
   AND (SELECT admitted_messages = 2 AND admit_gen IS NOT NULL FROM forgeyard.queue_slots WHERE queue = 'q')
   AND (SELECT count(*) = 1 AND sum(admitted_messages) = 1 FROM forgeyard.queue_admit_deltas WHERE queue = 'q')
   AND (SELECT admitted_messages = 3 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0111" "DO \$\$ BEGIN
              PERFORM forgeyard.enqueue('t', 'q', 'over', priority => 'emergency');
              RAISE EXCEPTION 'a fourth message was admitted';
            EXCEPTION WHEN SQLSTATE 'FY020' THEN NULL;
            END \$\$" || { echo "FAIL: the bound of 3 does not hold after the update"; exit 1; }
echo "ok - the bound counts both rows: a fourth message is FY020"
q "$v0111" "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
q "$v0111" "SELECT forgeyard.enqueue('t', 'q', 'again', priority => 'emergency')" >/dev/null
check "$v0111" "the claim held across the update is acked with its token, and a producer finds its room" \
  "(SELECT admitted_messages = 3 FROM forgeyard.queue_overview WHERE queue = 'q')
   AND (SELECT count(*) = 3 FROM forgeyard.messages WHERE queue = 'q' AND state = 'pending')
   AND NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = ${held% *})"
dropdb "$v0111"

# From 0.12.0, before the lanes' segments (F17): on the 0.12.0 catalog this library lists and
# claims from queue_lanes as it did there. The update moves the entries into segment 0 of
# queue_lane_entries (their lanes and positions kept) and drops queue_lanes: a claim held across
# it is acked with its token, the listed message is claimed from its lane, the delayed one waits,
# the dead letter is kept. Then maintain() moves the open segment on, and truncates segment 0 once
# its entries are consumed (the cursor moved by a claim of its own transaction).
v0120=fy_upgrade_0120
dropdb --if-exists "$v0120"
createdb "$v0120"
q "$v0120" "CREATE EXTENSION forgeyard VERSION '0.12.0'"
q "$v0120" "SELECT forgeyard.queue_create('t', 'q', '{\"max_attempts\": 1}');
            SELECT forgeyard.enqueue('t', 'q', 'dead'); SELECT forgeyard.enqueue('t', 'q', 'inflight');
            SELECT forgeyard.enqueue('t', 'q', 'ready'); SELECT forgeyard.enqueue('t', 'q', 'delayed', delay => '1 hour')" >/dev/null
q "$v0120" "SELECT forgeyard.nack('t', 'q', msg_id, claim_token, 'boom', true) FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
held=$(q "$v0120" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
check "$v0120" "on the 0.12.0 catalog: three listings in queue_lanes, one dead, one in flight, one ready, one delayed" \
  "to_regclass('forgeyard.queue_lane_entries') IS NULL
   AND (SELECT count(*) = 3 FROM forgeyard.queue_lanes)
   AND (SELECT count(*) = 1 FROM forgeyard.messages WHERE state = 'dead')
   AND (SELECT payload = 'inflight' FROM forgeyard.messages WHERE msg_id = ${held% *})"
q "$v0120" "ALTER EXTENSION forgeyard UPDATE"
check "$v0120" "0.12.0 updated to $latest: the entries are in segment 0, queue_lanes is gone" \
  "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')
   AND to_regclass('forgeyard.queue_lanes') IS NULL
   AND (SELECT count(*) = 3 FROM forgeyard.queue_lane_entries_0)
   AND (SELECT count(*) = 3 FROM forgeyard.queue_lane_entries)"
q "$v0120" "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
check "$v0120" "the claim held across the update is acked with its token" \
  "NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = ${held% *})
   AND (SELECT ready_pos = 3 FROM forgeyard.messages WHERE payload = 'ready')"
ready=$(q "$v0120" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
check "$v0120" "the ready message comes through its lane, the delayed one waits, the dead letter is kept" \
  "(SELECT payload = 'ready' FROM forgeyard.messages WHERE msg_id = ${ready% *})
   AND (SELECT count(*) = 0 FROM forgeyard.claim('t', 'q', 'c'))
   AND (SELECT count(*) = 1 FROM forgeyard.dead_list('t', 'q'))"
q "$v0120" "SELECT forgeyard.ack('t', 'q', ${ready% *}, ${ready#* })" >/dev/null
q "$v0120" "SELECT forgeyard.maintain()" >/dev/null
q "$v0120" "SELECT forgeyard.enqueue('t', 'q', 'after')" >/dev/null
check "$v0120" "maintain() moves the open segment on; a message enqueued after goes to segment 1" \
  "forgeyard.queue_lane_segment_open() = 1
   AND (SELECT count(*) = 1 FROM forgeyard.queue_lane_entries_1)"
q "$v0120" "SELECT msg_id FROM forgeyard.claim('t', 'q', 'c')" >/dev/null
q "$v0120" "SELECT forgeyard.maintain()" >/dev/null
check "$v0120" "segment 0 is truncated once its entries are consumed; segment 1 keeps the claimed one" \
  "(SELECT count(*) = 0 FROM forgeyard.queue_lane_entries_0)
   AND (SELECT count(*) = 1 FROM forgeyard.queue_lane_entries_1)"
dropdb "$v0120"

# From 0.13.0, before the counts' segments (F17): on the 0.13.0 catalog this library adds to the
# unpartitioned delta tables as it did there. The update moves their rows into the segments of
# their generations (a release row without a generation, which a library before 0.11.0 left, is
# folded into its release row), and the bound counts the same: a claim held across the update is
# acked with its token, a producer finds its room, and maintain() folds and truncates.
v0130=fy_upgrade_0130
dropdb --if-exists "$v0130"
createdb "$v0130"
q "$v0130" "CREATE EXTENSION forgeyard VERSION '0.13.0'"
q "$v0130" "SELECT forgeyard.queue_create('t', 'q', '{\"max_messages\": 3}');
            SELECT forgeyard.enqueue('t', 'q', 'acked', priority => 'emergency');
            SELECT forgeyard.enqueue('t', 'q', 'old', priority => 'emergency');
            SELECT forgeyard.enqueue('t', 'q', 'inflight', priority => 'emergency')" >/dev/null
q "$v0130" "SELECT forgeyard.ack('t', 'q', msg_id, claim_token) FROM forgeyard.claim('t', 'q', 'c', 2)" >/dev/null
held=$(q "$v0130" "SELECT msg_id || ' ' || claim_token FROM forgeyard.claim('t', 'q', 'c')")
q "$v0130" "UPDATE forgeyard.queue_release_deltas SET gen = NULL
             WHERE ctid = (SELECT ctid FROM forgeyard.queue_release_deltas ORDER BY gen LIMIT 1)" >/dev/null
check "$v0130" "on the 0.13.0 catalog: the deltas in plain tables, one release row without a generation, one message in flight" \
  "(SELECT relkind = 'r' FROM pg_class WHERE oid = 'forgeyard.queue_release_deltas'::regclass)
   AND to_regclass('forgeyard.queue_release_deltas_0') IS NULL
   AND (SELECT count(*) >= 1 FROM forgeyard.queue_release_deltas WHERE gen IS NULL)
   AND (SELECT sum(released_messages) = 2 FROM forgeyard.queue_release_deltas)
   AND (SELECT sum(admitted_messages) = 3 FROM forgeyard.queue_admit_deltas)
   AND (SELECT admitted_messages = 1 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0130" "ALTER EXTENSION forgeyard UPDATE"
check "$v0130" "0.13.0 updated to $latest: the deltas are in their generations' segments, the one without a generation folded" \
  "(SELECT extversion = '$latest' FROM pg_extension WHERE extname = 'forgeyard')
   AND (SELECT relkind = 'p' FROM pg_class WHERE oid = 'forgeyard.queue_release_deltas'::regclass)
   AND (SELECT relkind = 'p' FROM pg_class WHERE oid = 'forgeyard.queue_admit_deltas'::regclass)
   AND to_regclass('forgeyard.queue_release_deltas_before_0_14') IS NULL
   AND NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas WHERE tableoid::regclass::text
                     <> 'forgeyard.queue_release_deltas_' || (gen / 100) % 4)
   AND NOT EXISTS (SELECT FROM forgeyard.queue_admit_deltas WHERE tableoid::regclass::text
                     <> 'forgeyard.queue_admit_deltas_' || (gen / 10) % 4)
   AND (SELECT sum(released_messages) FROM forgeyard.queue_releases WHERE queue = 'q')
       + (SELECT coalesce(sum(released_messages), 0) FROM forgeyard.queue_release_deltas) = 2
   AND (SELECT sum(admitted_messages) = 3 FROM forgeyard.queue_admit_deltas)
   AND (SELECT admitted_messages = 1 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0130" "DO \$\$ BEGIN
              PERFORM forgeyard.enqueue('t', 'q', 'two', priority => 'emergency');
              PERFORM forgeyard.enqueue('t', 'q', 'three', priority => 'emergency');
              PERFORM forgeyard.enqueue('t', 'q', 'over', priority => 'emergency');
              RAISE EXCEPTION 'a fourth message was admitted';
            EXCEPTION WHEN SQLSTATE 'FY020' THEN NULL;
            END \$\$" || { echo "FAIL: the bound of 3 does not hold after the update"; exit 1; }
echo "ok - the bound counts the moved rows: with one in flight, a third message more is FY020 (the block rolled back)"
q "$v0130" "SELECT forgeyard.ack('t', 'q', ${held% *}, ${held#* })" >/dev/null
q "$v0130" "SELECT forgeyard.enqueue('t', 'q', 'after', priority => 'emergency')" >/dev/null
check "$v0130" "the claim held across the update is acked with its token, and a producer finds its room" \
  "NOT EXISTS (SELECT FROM forgeyard.messages WHERE msg_id = ${held% *})
   AND (SELECT admitted_messages = 1 FROM forgeyard.queue_overview WHERE queue = 'q')"
q "$v0130" "SELECT set_config('forgeyard.now_override', (clock_timestamp() + interval '20 seconds')::text, false);
            SELECT forgeyard.maintain(); SELECT forgeyard.maintain()" >/dev/null
check "$v0130" "two maintain() passes fold the admission and release rows and truncate their emptied segments; the bound is unchanged" \
  "NOT EXISTS (SELECT FROM forgeyard.queue_admit_deltas) AND NOT EXISTS (SELECT FROM forgeyard.queue_release_deltas)
   AND (SELECT count(*) FILTER (WHERE pg_relation_size(c.oid) > 0) = 0 FROM pg_class c
         WHERE c.relname ~ '^queue_(release|admit)_deltas_[0-3]\$' AND c.relnamespace = 'forgeyard'::regnamespace)
   AND (SELECT admitted_messages = 1 FROM forgeyard.queue_overview WHERE queue = 'q')"
dropdb "$v0130"

# Both equal a fresh install given the same grant, except for pg_init_privs: PostgreSQL records a
# GRANT run inside ALTER EXTENSION UPDATE (apply_access re-granting the recorded roles) as an initial
# privilege of the extension, which a grant after CREATE EXTENSION is not. Initial privileges are
# compared above, between the two paths with no role granted.
createdb "$new"
q "$new" "CREATE EXTENSION forgeyard"
q "$new" "SELECT forgeyard.grant_usage('fy_upgrade_app')" >/dev/null
catalog "$new" "$out/granted.txt"
grep -v '^init-privs ' "$out/granted.txt" >"$out/granted-acl.txt"
for db in "$old" "$prev"; do
  catalog "$db" "$out/$db.txt"
  grep -v '^init-privs ' "$out/$db.txt" >"$out/$db-acl.txt"
  same_catalog "$db: the updated catalog equals a fresh install with the same grant" "$out/granted-acl.txt" "$out/$db-acl.txt"
done

# A database that is not UTF8 installs the extension, but its audit log refuses to work: the chain
# hashes UTF-8 text, and another encoding would hash the same event otherwise.
createdb -E LATIN1 --locale=C -T template0 fy_latin1
q fy_latin1 "CREATE EXTENSION forgeyard"
check fy_latin1 "leases work in a LATIN1 database" "(SELECT acquired FROM forgeyard.lease_acquire('t', 'r', 'a', '1 min'))"
state=$(psql -X -q -At -v VERBOSITY=verbose -d fy_latin1 -c "SELECT forgeyard.audit_append('t', 'a', 'b', 'c')" 2>&1 |
        grep -c "0A000: the audit log needs a database with UTF8 encoding" || true)
[ "$state" = 1 ] || { echo "FAIL: audit_append in a LATIN1 database must refuse with 0A000 'the audit log needs a database with UTF8 encoding'"; exit 1; }
echo "ok - the audit log refuses a LATIN1 database (0A000) and appends nothing"
check fy_latin1 "nothing was appended there" "NOT EXISTS (SELECT FROM forgeyard.audit_events) AND NOT EXISTS (SELECT FROM forgeyard.audit_heads)"

cleanup
