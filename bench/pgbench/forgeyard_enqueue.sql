SELECT forgeyard.enqueue('bench', 'q', '\x7b226f72646572223a2031323334357d'::bytea);
