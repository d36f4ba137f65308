-- The PL/pgSQL edition's twin of extension/pg/table_cache.cpp's trigger (fy_invalidate_caches,
-- declared in sql/src/forgeyard.sql, body in extension/queue.cpp): the C++ edition caches rows
-- of forgeyard.queues, forgeyard.tenant_bindings and forgeyard.flow_resources per backend and this
-- statement trigger queues a relcache invalidation of the table. The PL/pgSQL edition caches
-- nothing (it reads those tables on each call), so there is nothing to invalidate. (Called other
-- than as a trigger, PostgreSQL refuses a trigger function by itself: 0A000.)

-- @body fy_invalidate_caches
BEGIN
    RETURN NULL;
END
