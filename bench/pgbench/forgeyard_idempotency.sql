\set k random(1, 1000000000000)
SELECT attempt FROM forgeyard.idem_begin('bench', 'bench.op', :client_id || '-' || :k, '\x01') \gset
SELECT forgeyard.idem_complete('bench', 'bench.op', :client_id || '-' || :k, 'response', :attempt);
