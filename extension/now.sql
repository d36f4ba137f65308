-- The PL/pgSQL edition's clock: the twin of extension/now.cpp and extension/pg/clock.cpp.

-- @body fy_now
-- forgeyard.now_override is a placeholder setting here (no library defines it), which any role
-- may set: it moves the clock only when the session's login role is a superuser or owns the
-- installation (the schema forgeyard), so that no other role can move lease expiry. now() pins no
-- search_path (it is the one clock of the caller's queries too), so every name here is qualified.
DECLARE
    setting pg_catalog.text := pg_catalog.current_setting('forgeyard.now_override', true);
    t pg_catalog.timestamptz;
BEGIN
    IF setting IS NULL OR setting OPERATOR(pg_catalog.=) '' THEN
        RETURN pg_catalog.clock_timestamp();
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) session_user
                      AND (r.rolsuper OR r.oid OPERATOR(pg_catalog.=)
                           (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                             WHERE n.nspname OPERATOR(pg_catalog.=) 'forgeyard'))) THEN
        RETURN pg_catalog.clock_timestamp();
    END IF;
    t := setting::pg_catalog.timestamptz;
    -- 'infinity' and the last years of the range would overflow now + duration and the epoch:
    -- the bound is the end of timestamptz's range less 36525 days, as in extension/pg/clock.cpp.
    IF NOT pg_catalog.isfinite(t)
       OR t OPERATOR(pg_catalog.>) '294176-12-31 00:00:00+00'::pg_catalog.timestamptz THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'forgeyard.now_override is out of range',
            DETAIL = 'it must be a finite timestamptz at least 100 years before the end of the timestamptz range';
    END IF;
    RETURN t;
END
