SELECT forgeyard.cas_update('bench_cas', jsonb_build_object('tenant_id', 'bench', 'id', :client_id::int), :v,
                            '{"value": 1}') AS v \gset
