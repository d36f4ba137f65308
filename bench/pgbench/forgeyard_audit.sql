SELECT seq FROM forgeyard.audit_append('bench', 'bench', 'order.paid', 'order/' || :client_id,
                                       '{"amount":1250,"currency":"EUR"}');
