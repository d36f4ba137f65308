SELECT count(*) FROM forgeyard.enqueue_batch('bench', 'q', pg_catalog.array_fill('\x7b226f72646572223a2031323334357d'::bytea, ARRAY[100]));
