-- Shared by regress/edge.sql and regress/attack.sql: included with \ir, never run on its own.
-- pg_temp.fixtures(tenant) makes one of everything for a tenant (a queue with a claimed message and
-- a dead letter, a lease, an idempotency key, an audit event, an inbox entry) and records the ids in
-- table ids; pg_temp.valid(argument, type) is a valid value for an API argument, as SQL text.

CREATE TEMP TABLE ids (tenant text, name text, v bigint, PRIMARY KEY (tenant, name));
CREATE FUNCTION pg_temp.fixtures(t text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE m bigint; tok bigint;
BEGIN
    PERFORM forgeyard.queue_create(t, 'q', '{"dead_letter_payload": "keep"}');
    m := forgeyard.enqueue(t, 'q', '\x01'::bytea);
    PERFORM forgeyard.enqueue(t, 'q', '\x02'::bytea);
    SELECT c.msg_id, c.claim_token INTO m, tok FROM forgeyard.claim(t, 'q', 'c', 1, '1 hour') c;
    INSERT INTO ids VALUES (t, 'msg_id', m), (t, 'claim_token', tok);
    INSERT INTO ids SELECT t, 'epoch', a.epoch FROM forgeyard.lease_acquire(t, 'r', 'o', '1 hour') a;
    INSERT INTO ids SELECT t, 'attempt', b.attempt FROM forgeyard.idem_begin(t, 's', 'k', '\x01') b;
    PERFORM forgeyard.audit_append(t, 'a', 'act', 'res');
    PERFORM forgeyard.inbox_accept(t, 'c', '00000000-0000-4000-8000-000000000001');
    -- a dead letter, for dead_list / dead_redrive / dead_purge
    m := forgeyard.enqueue(t, 'q', '\x03'::bytea, NULL, NULL, 'emergency');
    SELECT c.msg_id, c.claim_token INTO m, tok FROM forgeyard.claim(t, 'q', 'c', 1, '1 hour') c;
    PERFORM forgeyard.nack(t, 'q', m, tok, 'boom', true);
    INSERT INTO ids VALUES (t, 'dead_msg_id', m);
END $$;

-- A valid value for an argument, by name, then by type: the other arguments of each call.
CREATE FUNCTION pg_temp.valid(arg text, typ regtype) RETURNS text LANGUAGE sql AS $$
SELECT CASE
    WHEN arg = 'tenant' THEN quote_literal('edge')
    WHEN arg = 'queue' THEN quote_literal('q')
    WHEN arg = 'consumer' THEN quote_literal('c')
    WHEN arg = 'resource' AND typ = 'text'::regtype THEN quote_literal('r')
    WHEN arg = 'owner' THEN quote_literal('o')
    WHEN arg = 'scope' THEN quote_literal('s')
    WHEN arg = 'key' AND typ = 'text'::regtype THEN quote_literal('k')
    WHEN arg = 'key' THEN quote_literal('{"tenant_id": "edge", "id": 1}') || '::jsonb'
    WHEN arg = 'changes' THEN quote_literal('{"name": "n2"}') || '::jsonb'
    WHEN arg = 'priority' THEN quote_literal('interactive')
    WHEN arg = 'access' THEN quote_literal('usage')
    WHEN arg = 'options' THEN quote_literal('{"max_attempts": 4}') || '::jsonb'
    WHEN arg IN ('msg_id', 'claim_token', 'epoch', 'attempt') THEN (SELECT v::text FROM ids WHERE tenant = 'edge' AND name = arg)
    WHEN arg = 'msg_ids' THEN format('ARRAY[%s]::bigint[]', (SELECT v FROM ids WHERE tenant = 'edge' AND name = 'msg_id'))
    WHEN arg = 'claim_tokens' THEN format('ARRAY[%s]::bigint[]', (SELECT v FROM ids WHERE tenant = 'edge' AND name = 'claim_token'))
    WHEN arg IN ('prev_hash', 'anchor_hash') THEN 'decode(repeat(''00'', 32), ''hex'')'
    WHEN typ = 'text'::regtype THEN quote_literal('x')
    WHEN typ IN ('bigint'::regtype, 'integer'::regtype) THEN '1'
    WHEN typ = 'interval'::regtype THEN quote_literal('1 minute') || '::interval'
    WHEN typ = 'bytea'::regtype THEN quote_literal('\x01') || '::bytea'
    WHEN typ = 'jsonb'::regtype THEN quote_literal('{}') || '::jsonb'
    WHEN typ = 'uuid'::regtype THEN quote_literal('00000000-0000-4000-8000-00000000000a') || '::uuid'
    WHEN typ = 'regclass'::regtype THEN quote_literal('public.edge_rows') || '::regclass'
    WHEN typ = 'regrole'::regtype THEN quote_literal('fy_edge_role') || '::regrole'
    WHEN typ = 'timestamptz'::regtype THEN quote_literal('2029-12-31 23:00:00+00') || '::timestamptz'
    WHEN typ = 'boolean'::regtype THEN 'false'
    WHEN typ = 'text[]'::regtype THEN 'ARRAY[''x'']'
    WHEN typ = 'bytea[]'::regtype THEN 'ARRAY[''\x01''::bytea]'
    WHEN typ = 'jsonb[]'::regtype THEN 'ARRAY[''{}''::jsonb]'
    WHEN typ = 'uuid[]'::regtype THEN 'ARRAY[''00000000-0000-4000-8000-00000000000b''::uuid]'
    WHEN typ = 'timestamptz[]'::regtype THEN 'ARRAY[''2029-12-31 23:00:00+00''::timestamptz]'
    WHEN typ = 'bigint[]'::regtype THEN 'ARRAY[1]::bigint[]'
END $$;

