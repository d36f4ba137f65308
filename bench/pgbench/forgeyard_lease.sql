SELECT epoch FROM forgeyard.lease_acquire('bench', 'r' || :client_id, 'o', '30 seconds') \gset
SELECT forgeyard.lease_renew('bench', 'r' || :client_id, :epoch, '30 seconds');
SELECT forgeyard.lease_release('bench', 'r' || :client_id, :epoch);
