-- Shared by the pgTAP files: included with \ir, never run on its own (pg_prove runs regress/*.sql).
-- {sqlstate, message, detail} of the error sql raises (NULL if none).
CREATE FUNCTION pg_temp.err(sql text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN ARRAY[st, msg, det];
END $$;
