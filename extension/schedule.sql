-- The PL/pgSQL edition's workflow schedules: the twin of extension/schedule.cpp, with the rules of
-- core/schedule.cpp (the spec parser and its messages, fire times, what a tick starts).
--
-- A parsed spec is a bigint[8]: {every_usecs (> 0: "@every"), minute bits, hour bits, day bits
-- (1..31), month bits (1..12), weekday bits (0 = Sunday), any_day (1/0), any_weekday (1/0)}.
-- Instants are microseconds since 1970 (bigint), as in the core.
--
-- Time zones: core::schedule::Zone reads the tz database's TZif files; here PostgreSQL reads the
-- same files (a server built --with-system-tzdata) and gives the offset at an instant. A zone name
-- is accepted as Zone::load accepts it: "UTC", or the exact (case-sensitive) name of a file of the
-- tz database, which pg_timezone_names lists (all but the right/ copies, which hold leap seconds).
-- Offsets: a zone name with a '/' through timezone(name, t); one without (CET, EST5EDT, Japan ...)
-- through the setting TimeZone (set for the computation, and back), since timezone(name, t)
-- would read a name such as CET as the fixed-offset abbreviation; a right/ zone through
-- timezone(name, t) with its leap seconds added back (Zone ignores them; since 1972 offsets are
-- whole minutes).

-- @helper
-- s cut to at most n bytes (at a character boundary): std::string::substr(0, n) of a message.
CREATE FUNCTION forgeyard_pl.workflow_left_bytes(s text, n integer)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    k integer;
BEGIN
    IF octet_length(s) <= n THEN
        RETURN s;
    END IF;
    k := n;
    WHILE octet_length(left(s, k)) > n LOOP
        k := k - 1;
    END LOOP;
    RETURN left(s, k);
END
$$;

-- core::format_timestamp: ISO 8601 UTC to the microsecond ("2030-01-01T00:15:00.000000Z"), in
-- integer arithmetic (H. Hinnant's civil_from_days).
CREATE FUNCTION forgeyard_pl.workflow_iso(us bigint)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    secs bigint := CASE WHEN us >= 0 OR us % 1000000 = 0 THEN us / 1000000 ELSE us / 1000000 - 1 END;
    micros bigint := us - secs * 1000000;
    days bigint := CASE WHEN secs >= 0 OR secs % 86400 = 0 THEN secs / 86400 ELSE secs / 86400 - 1 END;
    rest bigint := secs - days * 86400;
    z bigint := days + 719468;
    era bigint := CASE WHEN z >= 0 OR z % 146097 = 0 THEN z / 146097 ELSE z / 146097 - 1 END;
    doe bigint := z - era * 146097;
    yoe bigint := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy bigint := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp bigint := (5 * doy + 2) / 153;
    d bigint := doy - (153 * mp + 2) / 5 + 1;
    m bigint := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    y bigint := yoe + era * 400 + CASE WHEN m <= 2 THEN 1 ELSE 0 END;
BEGIN
    RETURN CASE WHEN y < 0 THEN '-' || lpad((-y)::text, 3, '0') ELSE lpad(y::text, 4, '0') END
        || '-' || lpad(m::text, 2, '0') || '-' || lpad(d::text, 2, '0')
        || 'T' || lpad((rest / 3600)::text, 2, '0') || ':' || lpad((rest / 60 % 60)::text, 2, '0')
        || ':' || lpad((rest % 60)::text, 2, '0') || '.' || lpad(micros::text, 6, '0') || 'Z';
END
$$;

-- bad_spec: 22023 naming the spec and why, with the spec grammar as the detail.
CREATE FUNCTION forgeyard_pl.workflow_sched_bad(spec text, why text)
    RETURNS void LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = 'schedule spec ''' || forgeyard_pl.workflow_left_bytes(spec, 200) || ''' is not valid: ' || why,
        DETAIL = 'a spec is 5 cron fields (minute hour day-of-month month day-of-week), @hourly, @daily, @weekly, '
                 '@monthly, @yearly, or ''@every <interval>'' such as ''@every 15m''';
END
$$;

-- ASCII lower case (std::tolower in the C locale).
CREATE FUNCTION forgeyard_pl.workflow_sched_lower(s text)
    RETURNS text LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    RETURN translate(s, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
END
$$;

-- parse_every: "1h30m", "90s", "15 minutes", "1 day 2 hours" in microseconds.
CREATE FUNCTION forgeyard_pl.workflow_sched_every(spec text, s text)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    pos integer := 1;
    len integer := length(s);
    total bigint := 0;
    any_part boolean := false;
    n bigint;
    ulen integer;
    unit text;
    seconds bigint;
BEGIN
    LOOP
        WHILE pos <= len AND substr(s, pos, 1) = ' ' LOOP
            pos := pos + 1;
        END LOOP;
        EXIT WHEN pos > len;
        IF substr(s, pos, 1) NOT BETWEEN '0' AND '9' OR octet_length(substr(s, pos, 1)) <> 1 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'an interval is numbers with units');
        END IF;
        n := 0;
        WHILE pos <= len AND octet_length(substr(s, pos, 1)) = 1 AND substr(s, pos, 1) BETWEEN '0' AND '9' LOOP
            n := n * 10 + ascii(substr(s, pos, 1)) - 48;
            IF n > 1000000000 THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is too long');
            END IF;
            pos := pos + 1;
        END LOOP;
        WHILE pos <= len AND substr(s, pos, 1) = ' ' LOOP
            pos := pos + 1;
        END LOOP;
        ulen := 0;
        WHILE pos + ulen <= len AND substr(s, pos + ulen, 1) ~ '^[A-Za-z]$' LOOP
            ulen := ulen + 1;
        END LOOP;
        unit := forgeyard_pl.workflow_sched_lower(substr(s, pos, ulen));
        pos := pos + ulen;
        seconds := CASE
            WHEN unit IN ('s', 'sec', 'secs', 'second', 'seconds') THEN 1
            WHEN unit IN ('m', 'min', 'mins', 'minute', 'minutes') THEN 60
            WHEN unit IN ('h', 'hour', 'hours') THEN 3600
            WHEN unit IN ('d', 'day', 'days') THEN 86400 END;
        IF seconds IS NULL THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the units of an interval are s, m, h and d');
        END IF;
        total := total + n * seconds;
        IF total > 366 * 86400 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is longer than 366 days');
        END IF;
        any_part := true;
    END LOOP;
    IF NOT any_part THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, '@every needs an interval');
    END IF;
    IF total * 1000000 < 1000000 THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, 'the interval is shorter than 1 second');
    END IF;
    RETURN total * 1000000;
END
$$;

-- field_value: a number (at most 4 digits), or a month (field 3) or weekday (field 4) by name.
CREATE FUNCTION forgeyard_pl.workflow_sched_value(spec text, t text, field integer)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    name text := forgeyard_pl.workflow_sched_lower(t);
    i integer;
BEGIN
    IF field = 3 THEN
        i := array_position(ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'], name);
        IF i IS NOT NULL THEN
            RETURN i;
        END IF;
    ELSIF field = 4 THEN
        i := array_position(ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'], name);
        IF i IS NOT NULL THEN
            RETURN i - 1;
        END IF;
    END IF;
    IF t = '' OR octet_length(t) > 4 OR t !~ '^[0-9]+$' THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, '''' || t || ''' is not a value');
    END IF;
    RETURN t::integer;
END
$$;

-- parse_field: one cron field (values lo..hi) as bits.
CREATE FUNCTION forgeyard_pl.workflow_sched_field(spec text, t text, field integer, lo integer, hi integer)
    RETURNS bigint LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    bits bigint := 0;
    tl integer := length(t);
    start integer := 1;
    next_start integer;
    comma integer;
    item text;
    step integer;
    slash integer;
    dash integer;
    v_from integer;
    v_to integer;
    top integer;
    v integer;
BEGIN
    WHILE start <= tl + 1 LOOP
        comma := strpos(substr(t, start), ',');
        IF comma = 0 THEN
            item := substr(t, start);
            next_start := tl + 2;
        ELSE
            item := substr(t, start, comma - 1);
            next_start := start + comma;
        END IF;
        step := 1;
        slash := strpos(item, '/');
        IF slash > 0 THEN
            step := forgeyard_pl.workflow_sched_value(spec, substr(item, slash + 1), -1);
            IF step < 1 THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, 'a step must be at least 1');
            END IF;
            item := left(item, slash - 1);
        END IF;
        v_from := lo;
        v_to := hi;
        IF item <> '*' THEN
            dash := strpos(item, '-');
            IF dash = 0 THEN
                v_from := forgeyard_pl.workflow_sched_value(spec, item, field);
                v_to := CASE WHEN step > 1 THEN hi ELSE v_from END;
            ELSE
                v_from := forgeyard_pl.workflow_sched_value(spec, left(item, dash - 1), field);
                v_to := forgeyard_pl.workflow_sched_value(spec, substr(item, dash + 1), field);
            END IF;
            top := CASE WHEN field = 4 THEN 7 ELSE hi END;
            IF v_from < lo OR v_to > top OR v_from > v_to THEN
                PERFORM forgeyard_pl.workflow_sched_bad(spec, format('the %s field takes %s-%s, not ''%s''',
                    (ARRAY['minute', 'hour', 'day-of-month', 'month', 'day-of-week'])[field + 1], lo, top, item));
            END IF;
        END IF;
        v := v_from;
        WHILE v <= v_to LOOP
            bits := bits | (1::bigint << (CASE WHEN field = 4 THEN v % 7 ELSE v END));
            v := v + step;
        END LOOP;
        start := next_start;
    END LOOP;
    RETURN bits;
END
$$;

-- core::schedule::parse_spec.
CREATE FUNCTION forgeyard_pl.workflow_sched_parse(spec text)
    RETURNS bigint[] LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    s text;
    word text;
    cron text;
    fields text[];
    n integer;
BEGIN
    IF octet_length(spec) > 200 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.string_too_long@', MESSAGE = 'spec is longer than 200 bytes';
    END IF;
    s := ltrim(rtrim(spec, ' '), ' ');
    cron := s;
    IF left(s, 1) = '@' THEN
        word := forgeyard_pl.workflow_sched_lower(split_part(s, ' ', 1));
        IF word = '@every' THEN
            RETURN ARRAY[forgeyard_pl.workflow_sched_every(spec, substr(s, 7)), 0, 0, 0, 0, 0, 1, 1];
        END IF;
        IF strpos(s, ' ') > 0 THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'unknown macro');
        END IF;
        cron := CASE
            WHEN word = '@hourly' THEN '0 * * * *'
            WHEN word IN ('@daily', '@midnight') THEN '0 0 * * *'
            WHEN word = '@weekly' THEN '0 0 * * 0'
            WHEN word = '@monthly' THEN '0 0 1 * *'
            WHEN word IN ('@yearly', '@annually') THEN '0 0 1 1 *' END;
        IF cron IS NULL THEN
            PERFORM forgeyard_pl.workflow_sched_bad(spec, 'unknown macro');
        END IF;
    END IF;
    SELECT coalesce(array_agg(m.f[1] ORDER BY m.i), '{}') INTO fields
      FROM regexp_matches(cron, E'[^ \t]+', 'g') WITH ORDINALITY m(f, i);
    n := coalesce(array_length(fields, 1), 0);
    IF n <> 5 THEN
        PERFORM forgeyard_pl.workflow_sched_bad(spec, 'cron takes 5 fields, not ' || n);
    END IF;
    RETURN ARRAY[0,
                 forgeyard_pl.workflow_sched_field(spec, fields[1], 0, 0, 59),
                 forgeyard_pl.workflow_sched_field(spec, fields[2], 1, 0, 23),
                 forgeyard_pl.workflow_sched_field(spec, fields[3], 2, 1, 31),
                 forgeyard_pl.workflow_sched_field(spec, fields[4], 3, 1, 12),
                 forgeyard_pl.workflow_sched_field(spec, fields[5], 4, 0, 6),
                 CASE WHEN left(fields[3], 1) = '*' THEN 1 ELSE 0 END,
                 CASE WHEN left(fields[5], 1) = '*' THEN 1 ELSE 0 END];
END
$$;

-- Zone::load's checks of a zone name (22023 "unknown time zone"); returns the name. A name is a
-- zone when a file of the tz database has it exactly: PostgreSQL's setting TimeZone finds a file
-- whatever the case of the name and shows the file's own spelling, so a name that the setting
-- takes and shows unchanged is a file, if it cannot be a POSIX TZ rule or an offset (it has a '/',
-- or only letters). Other names, and the names refused, are looked up in pg_timezone_names.
CREATE FUNCTION forgeyard_pl.workflow_sched_zone(name text)
    RETURNS text LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    norm text;
    stem text;
    probe text;
    saved text;
    canon text;
    is_file boolean;
    is_dir boolean;
    why text;
BEGIN
    IF name = 'UTC' THEN
        RETURN name;
    END IF;
    IF name = '' OR octet_length(name) > 100 OR left(name, 1) IN ('/', '.') OR name !~ '^[A-Za-z0-9/_+-]+$'
       OR strpos(name, '..') > 0 THEN
        why := 'a zone is a name such as Europe/Berlin';
    ELSE
        -- (The file system reads "a//b" as "a/b".)
        norm := regexp_replace(name, '/{2,}', '/', 'g');
        stem := rtrim(norm, '/');
        -- right/X: the zone X with leap seconds, for every X but posix/..., localtime and posixrules.
        probe := CASE WHEN left(norm, 6) = 'right/' THEN substr(norm, 7) ELSE norm END;
        IF norm = stem AND (strpos(probe, '/') > 0 OR probe ~ '^[A-Za-z_]+$')
           AND (left(norm, 6) <> 'right/' OR (probe NOT IN ('localtime', 'posixrules') AND left(probe, 6) <> 'posix/')) THEN
            BEGIN
                saved := current_setting('TimeZone');
                PERFORM set_config('TimeZone', probe, true);
                canon := current_setting('TimeZone');
                PERFORM set_config('TimeZone', saved, true);
            EXCEPTION WHEN OTHERS THEN
                canon := NULL;
            END;
            IF canon = probe THEN
                RETURN name;
            END IF;
        END IF;
        SELECT coalesce(bool_or(z.name = stem OR (left(stem, 6) = 'right/' AND z.name = substr(stem, 7)
                                                  AND z.name NOT IN ('localtime', 'posixrules')
                                                  AND left(z.name, 6) <> 'posix/')), false),
               coalesce(bool_or(left(z.name, length(stem) + 1) = stem || '/'
                                OR (left(stem, 6) = 'right/' AND left(z.name, length(stem) - 5) = substr(stem, 7) || '/'
                                    AND left(z.name, 6) <> 'posix/')), false)
                 OR stem IN ('right', 'posix')
          INTO is_file, is_dir
          FROM pg_catalog.pg_timezone_names z;
        IF is_file AND norm = stem THEN
            RETURN name;
        ELSIF is_dir OR (stem = 'leapseconds' AND norm = stem) THEN
            -- (The C++ edition reads a directory's name as a file, and fails with XX000.)
            why := 'not a TZif file';
        ELSE
            why := 'no such zone in the tz database';
        END IF;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
        MESSAGE = 'unknown time zone "' || forgeyard_pl.workflow_left_bytes(name, 100) || '" (' || why || ')';
END
$$;

-- Zone::offset_at: seconds east of UTC at `utc` (seconds since 1970) in `zone` read in `mode`
-- (workflow_sched_fires: 0 UTC, 1 timezone(zone, t), 2 the setting TimeZone, 3 a right/ zone).
CREATE FUNCTION forgeyard_pl.workflow_sched_offset(zone text, mode integer, utc bigint)
    RETURNS bigint LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    o bigint;
BEGIN
    IF mode = 1 THEN
        RETURN extract(epoch FROM pg_catalog.timezone(zone, to_timestamp(utc::double precision)))::bigint - utc;
    ELSIF mode = 2 THEN
        RETURN extract(timezone FROM to_timestamp(utc::double precision))::bigint;
    ELSIF mode = 3 THEN
        o := extract(epoch FROM pg_catalog.timezone(zone, to_timestamp(utc::double precision)))::bigint - utc;
        IF utc >= 78710400 THEN  -- leap seconds: from 1972-07-01 on
            o := o + ((-o) % 60 + 60) % 60;
        END IF;
        RETURN o;
    END IF;
    RETURN 0;
END
$$;

-- The fires of a spec in `zone` after `after`, up to `upto`, counted up to max_count (each as
-- next_fire(spec, zone, previous) finds it): how many were counted, the newest `keep` of them
-- (ascending), and the fire after the last one counted (`following`: > upto, or the next once
-- max_count were counted). With max_count 0, `following` is next_fire(spec, zone, after).
-- 22023 when a search finds no fire within 5 years. A cron fire is a local minute of the zone:
-- one in a gap does not fire, one in an overlap fires at its first instant.
CREATE FUNCTION forgeyard_pl.workflow_sched_fires(spec bigint[], zone text, after bigint, upto bigint,
                                                  max_count integer, keep integer,
                                                  OUT counted integer, OUT newest bigint[], OUT following bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    every bigint := spec[1];
    minute_bits bigint := spec[2];
    hour_bits bigint := spec[3];
    day_bits bigint := spec[4];
    month_bits bigint := spec[5];
    weekday_bits bigint := spec[6];
    either boolean := spec[7] = 1 OR spec[8] = 1;
    first bigint;
    k integer;
    mode integer;
    z text;
    saved text;
    s bigint;
    loc bigint;
    dayno bigint;
    rest bigint;
    era bigint;
    doe bigint;
    yoe bigint;
    doy bigint;
    mp bigint;
    y bigint;
    mo integer;
    d integer;
    h integer;
    mi integer;
    wd integer;
    dim integer;
    last_year bigint;
    prev bigint := after;
    ring bigint[];
    at_local bigint;
    o1 bigint;
    o2 bigint;
    u bigint;
    front bigint;
    fire bigint;
    next_minute integer[];
    next_hour integer[];
    i integer;
BEGIN
    counted := 0;
    newest := '{}';
    IF every > 0 THEN
        first := (CASE WHEN after >= 0 OR after % every = 0 THEN after / every ELSE after / every - 1 END + 1) * every;
        IF first <= upto THEN
            counted := least((upto - first) / every + 1, max_count::bigint);
        END IF;
        k := least(keep, counted);
        SELECT coalesce(array_agg(first + (counted - k + g) * every ORDER BY g), '{}') INTO newest
          FROM generate_series(0, k - 1) g;
        following := first + counted * every;
        RETURN;
    END IF;
    IF zone = 'UTC' THEN
        mode := 0;
    ELSIF left(zone, 6) = 'right/' THEN
        mode := 3;
        z := regexp_replace(zone, '/{2,}', '/', 'g');
    ELSIF strpos(zone, '/') > 0 THEN
        mode := 1;
        z := regexp_replace(zone, '/{2,}', '/', 'g');
    ELSE
        mode := 2;
        z := zone;
        saved := current_setting('TimeZone');
        PERFORM set_config('TimeZone', zone, true);
    END IF;
    -- The next set minute (hour) from each one on; 60 (24): none.
    next_minute := array_fill(60, ARRAY[61], ARRAY[0]);
    FOR i IN REVERSE 59 .. 0 LOOP
        next_minute[i] := CASE WHEN (minute_bits >> i) & 1 = 1 THEN i ELSE next_minute[i + 1] END;
    END LOOP;
    next_hour := array_fill(24, ARRAY[25], ARRAY[0]);
    FOR i IN REVERSE 23 .. 0 LOOP
        next_hour[i] := CASE WHEN (hour_bits >> i) & 1 = 1 THEN i ELSE next_hour[i + 1] END;
    END LOOP;
    IF keep > 0 THEN
        ring := array_fill(0::bigint, ARRAY[keep]);
    END IF;
    -- The local minute of `after`, as a civil time.
    s := CASE WHEN after >= 0 OR after % 1000000 = 0 THEN after / 1000000 ELSE after / 1000000 - 1 END;
    loc := s + CASE mode WHEN 0 THEN 0 ELSE forgeyard_pl.workflow_sched_offset(z, mode, s) END;
    loc := (CASE WHEN loc >= 0 OR loc % 60 = 0 THEN loc / 60 ELSE loc / 60 - 1 END) * 60;
    dayno := CASE WHEN loc >= 0 OR loc % 86400 = 0 THEN loc / 86400 ELSE loc / 86400 - 1 END;
    rest := loc - dayno * 86400;
    era := CASE WHEN dayno + 719468 >= 0 OR (dayno + 719468) % 146097 = 0 THEN (dayno + 719468) / 146097
                ELSE (dayno + 719468) / 146097 - 1 END;
    doe := dayno + 719468 - era * 146097;
    yoe := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp := (5 * doy + 2) / 153;
    d := doy - (153 * mp + 2) / 5 + 1;
    mo := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    y := yoe + era * 400 + CASE WHEN mo <= 2 THEN 1 ELSE 0 END;
    h := rest / 3600;
    mi := rest % 3600 / 60;
    wd := ((dayno + 4) % 7 + 7) % 7;
    last_year := y + 5;
    LOOP
        IF y > last_year THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                MESSAGE = 'the schedule never fires within 5 years';
        END IF;
        dim := CASE WHEN mo = 2 THEN CASE WHEN (y % 4 = 0 AND y % 100 <> 0) OR y % 400 = 0 THEN 29 ELSE 28 END
                    WHEN mo IN (4, 6, 9, 11) THEN 30 ELSE 31 END;
        IF (month_bits >> mo) & 1 = 0 THEN
            -- To the month's last day, then the next day.
            dayno := dayno + (dim - d);
            wd := (wd + (dim - d)) % 7;
            d := dim;
            h := 24;
        ELSIF NOT (CASE WHEN either THEN (day_bits >> d) & 1 = 1 AND (weekday_bits >> wd) & 1 = 1
                        ELSE (day_bits >> d) & 1 = 1 OR (weekday_bits >> wd) & 1 = 1 END) THEN
            h := 24;
        ELSE
            IF (hour_bits >> h) & 1 = 0 THEN
                h := next_hour[h];
                mi := 0;
            ELSE
                mi := next_minute[mi];
                IF mi > 59 THEN
                    mi := 0;
                    h := h + 1;
                ELSE
                    at_local := dayno * 86400 + h * 3600 + mi * 60;
                    -- Zone::from_local, its first instant.
                    IF mode = 0 THEN
                        front := at_local;
                    ELSE
                        front := NULL;
                        o1 := forgeyard_pl.workflow_sched_offset(z, mode, at_local - 86400);
                        o2 := forgeyard_pl.workflow_sched_offset(z, mode, at_local + 86400);
                        u := at_local - o1;
                        IF u + forgeyard_pl.workflow_sched_offset(z, mode, u) = at_local THEN
                            front := u;
                        END IF;
                        IF o2 <> o1 THEN
                            u := at_local - o2;
                            IF u + forgeyard_pl.workflow_sched_offset(z, mode, u) = at_local AND (front IS NULL OR u < front) THEN
                                front := u;
                            END IF;
                        END IF;
                    END IF;
                    IF front IS NOT NULL AND front * 1000000 > prev THEN
                        fire := front * 1000000;
                        IF counted >= max_count OR fire > upto THEN
                            following := fire;
                            EXIT;
                        END IF;
                        IF keep > 0 THEN
                            ring[counted % keep + 1] := fire;
                        END IF;
                        counted := counted + 1;
                        prev := fire;
                        last_year := y + 5;
                    END IF;
                    mi := mi + 1;
                    IF mi > 59 THEN
                        mi := 0;
                        h := h + 1;
                    END IF;
                END IF;
            END IF;
        END IF;
        IF h > 23 THEN
            -- The next day.
            h := 0;
            mi := 0;
            d := d + 1;
            dayno := dayno + 1;
            wd := (wd + 1) % 7;
            IF d > dim THEN
                d := 1;
                mo := mo + 1;
                IF mo > 12 THEN
                    mo := 1;
                    y := y + 1;
                END IF;
            END IF;
        END IF;
    END LOOP;
    IF mode = 2 THEN
        PERFORM set_config('TimeZone', saved, true);
    END IF;
    k := least(keep, counted);
    IF k > 0 THEN
        SELECT array_agg(ring[(counted - k + g) % keep + 1] ORDER BY g) INTO newest FROM generate_series(0, k - 1) g;
    END IF;
END
$$;

-- core::schedule::due: what a tick at `now` does with a schedule whose next fire is `next`: the
-- fires to start (the newest catch_up + 1 of those due, oldest first), the count of the others
-- (skipped, counted one by one up to 100,000), and the schedule's next fire after now.
CREATE FUNCTION forgeyard_pl.workflow_sched_due(spec bigint[], zone text, next bigint, now_us bigint, catch_up integer,
                                                OUT start bigint[], OUT skipped bigint, OUT next_after bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    keep integer := catch_up + 1;
    g record;
    counted bigint;
    f bigint;
    win bigint;
    w_from bigint;
BEGIN
    IF next > now_us THEN
        start := '{}';
        skipped := 0;
        next_after := next;
        RETURN;
    END IF;
    -- `next` and then the fires after it, up to 100,000.
    SELECT * INTO g FROM forgeyard_pl.workflow_sched_fires(spec, zone, next, now_us, 99999, keep);
    counted := 1 + g.counted;
    start := ARRAY[next] || g.newest;
    IF cardinality(start) > keep THEN
        start := start[cardinality(start) - keep + 1 :];
    END IF;
    f := g.following;
    IF f <= now_us THEN
        -- Too many to count: the newest fires are found in a window before now that doubles until
        -- it holds enough of them (or reaches back to the fires counted).
        win := 60000000;
        LOOP
            w_from := greatest(now_us - win, f - 1);
            SELECT * INTO g FROM forgeyard_pl.workflow_sched_fires(spec, zone, w_from, now_us, 100000, keep);
            IF cardinality(g.newest) >= keep OR w_from = f - 1 THEN
                start := start || g.newest;
                IF cardinality(start) > keep THEN
                    start := start[cardinality(start) - keep + 1 :];
                END IF;
                EXIT;
            END IF;
            win := win * 2;
        END LOOP;
    END IF;
    skipped := greatest(counted - cardinality(start), 0);
    next_after := (forgeyard_pl.workflow_sched_fires(spec, zone, now_us, now_us, 0, 0)).following;
END
$$;

-- schedule::tick: starts the runs of every due schedule (of `tenant`, or all), at most 1000
-- schedules a call, each once however many tickers run at once; returns the runs started.
-- maintain() runs it too (the caller checked the tenant).
CREATE FUNCTION forgeyard_pl.workflow_schedule_tick(p_tenant text, now_at timestamptz)
    RETURNS bigint LANGUAGE plpgsql
    AS $$
DECLARE
    due_rows forgeyard.wf_schedules[];
    sch forgeyard.wf_schedules;
    now_us bigint := forgeyard_pl.usecs(now_at);
    d record;
    fire bigint;
    started bigint := 0;
    n integer;
BEGIN
    -- Each due schedule once: another ticker skips the rows this one holds, and finds their
    -- next_fire moved once it commits. All of them are locked before the first run starts.
    SELECT array_agg(q.s) INTO due_rows
      FROM (SELECT s FROM forgeyard.wf_schedules s
             WHERE (p_tenant IS NULL OR s.tenant_id = p_tenant) AND s.next_fire <= now_at
             ORDER BY s.next_fire LIMIT 1000 FOR UPDATE SKIP LOCKED) q;
    IF due_rows IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH sch IN ARRAY due_rows LOOP
        SELECT * INTO d FROM forgeyard_pl.workflow_sched_due(forgeyard_pl.workflow_sched_parse(sch.spec), sch.timezone,
                                                             forgeyard_pl.usecs(sch.next_fire), now_us, sch.catch_up);
        FOREACH fire IN ARRAY d.start LOOP
            PERFORM forgeyard.workflow_start(sch.tenant_id, sch.workflow, sch.version,
                                             sch.schedule || '@' || forgeyard_pl.workflow_iso(fire), sch.input);
        END LOOP;
        n := cardinality(d.start);
        started := started + n;
        UPDATE forgeyard.wf_schedules s
           SET next_fire = now_at + (d.next_after - now_us) * interval '1 microsecond',
               last_fire = coalesce(now_at + (d.start[n] - now_us) * interval '1 microsecond', s.last_fire),
               fires = s.fires + n, skipped = s.skipped + d.skipped, updated_at = now_at
         WHERE s.tenant_id = sch.tenant_id AND s.schedule = sch.schedule;
    END LOOP;
    RETURN started;
END
$$;

-- @body fy_schedule_create
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_schedule text := forgeyard_pl.name_arg('schedule', schedule, 200);
    t_workflow text := forgeyard_pl.name_arg('workflow', workflow, 100);
    t_version integer;
    t_spec text;
    parsed bigint[];
    now_at timestamptz;
    now_us bigint;
    o_timezone text := 'UTC';
    o_catch_up integer := 0;
    o_input text := '{}';
    e record;
    n integer;
    next_us bigint;
    equal boolean;
BEGIN
    PERFORM forgeyard_pl.not_null('version', version IS NOT NULL);
    t_version := version;
    IF t_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
            MESSAGE = 'version must be at least 1, not ' || t_version;
    END IF;
    t_spec := forgeyard_pl.text_arg('spec', spec, 200);
    parsed := forgeyard_pl.workflow_sched_parse(t_spec);
    now_at := forgeyard.now();
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    IF options IS NOT NULL THEN
        IF jsonb_typeof(options) <> 'object' THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@', MESSAGE = 'options must be a JSON object';
        END IF;
        FOR e IN SELECT j.key, jsonb_typeof(j.value) AS type,
                        CASE WHEN j.key = 'input' THEN j.value::text ELSE j.value #>> '{}' END AS value
                   FROM jsonb_each(options) j LOOP
            IF e.key = 'timezone' THEN
                IF e.type <> 'string' THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = 'schedule option timezone must be a string';
                END IF;
                o_timezone := forgeyard_pl.workflow_sched_zone(e.value);
            ELSIF e.key = 'catch_up' THEN
                o_catch_up := -1;
                IF e.type = 'number' AND e.value ~ '^[0-9]{1,4}$' THEN
                    o_catch_up := e.value::integer;
                END IF;
                IF o_catch_up < 0 OR o_catch_up > 1000 THEN
                    RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                        MESSAGE = 'schedule option catch_up must be a whole number from 0 to 1000';
                END IF;
            ELSIF e.key = 'input' THEN
                o_input := coalesce(e.value, '');
            ELSE
                RAISE EXCEPTION USING ERRCODE = '@sqlstate.invalid_parameter@',
                    MESSAGE = 'unknown schedule option ' || forgeyard_pl.workflow_left_bytes(e.key, 100)
                              || ' (the options are timezone, catch_up and input)';
            END IF;
        END LOOP;
    END IF;
    now_us := forgeyard_pl.usecs(now_at);
    next_us := (forgeyard_pl.workflow_sched_fires(parsed, o_timezone, now_us, now_us, 0, 0)).following;
    INSERT INTO forgeyard.wf_schedules (tenant_id, schedule, workflow, version, spec, timezone, catch_up, input,
                                        next_fire, created_at, updated_at)
    VALUES (t_tenant, t_schedule, t_workflow, t_version, t_spec, o_timezone, o_catch_up, o_input::jsonb,
            now_at + (next_us - now_us) * interval '1 microsecond', now_at, now_at)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        -- There already: the same definition is a no-op, another one 42710.
        SELECT s.workflow = t_workflow AND s.version = t_version AND s.spec = t_spec AND s.timezone = o_timezone
               AND s.catch_up = o_catch_up AND s.input = o_input::jsonb
          INTO equal
          FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant AND s.schedule = t_schedule;
        IF NOT coalesce(equal, false) THEN
            RAISE EXCEPTION USING ERRCODE = '@sqlstate.duplicate_object@',
                MESSAGE = format('schedule "%s" already exists for tenant "%s" with another definition', t_schedule, t_tenant),
                DETAIL = 'drop it first (schedule_drop), or create it under another name';
        END IF;
    END IF;
END

-- @body fy_schedule_drop
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
    t_schedule text := forgeyard_pl.name_arg('schedule', schedule, 200);
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    DELETE FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant AND s.schedule = t_schedule;
    RETURN FOUND;
END

-- @body fy_schedule_tick
DECLARE
    t_tenant text := forgeyard_pl.optional_name_arg('tenant', tenant, 128);
    now_at timestamptz := forgeyard.now();
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN forgeyard_pl.workflow_schedule_tick(t_tenant, now_at)::integer;
END

-- @body fy_schedule_list
DECLARE
    t_tenant text := forgeyard_pl.name_arg('tenant', tenant, 128);
BEGIN
    PERFORM forgeyard_pl.check_tenant(t_tenant);
    RETURN QUERY
    SELECT s.schedule, s.workflow, s.version, s.spec, s.timezone, s.catch_up, s.input, s.next_fire, s.last_fire,
           s.fires, s.skipped
      FROM forgeyard.wf_schedules s WHERE s.tenant_id = t_tenant ORDER BY s.schedule COLLATE "C";
END
