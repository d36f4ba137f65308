-- One row per client, updated from the version the last update returned (:v starts at 1).
UPDATE bench_cas_plain SET value = value + 1, entity_version = entity_version + 1
 WHERE tenant_id = 'bench' AND id = :client_id::int AND entity_version = :v
RETURNING entity_version AS v \gset
