-- forgeyard 0.10.0 -> 0.11.0: release generations, an ack that does not walk the versions a held
-- snapshot keeps of its slot's release row (F17, step 3 of docs/queue-storage-design.md, its first
-- part). The deltas a 0.10.0 library left, or leaves in a session that loaded it before the
-- update (generation NULL), are folded by maintain().
\echo Use "ALTER EXTENSION forgeyard UPDATE TO '0.11.0'" to load this file. \quit

-- Release generations (F17, step 3 of docs/queue-storage-design.md, its first part): an ack no
-- longer updates its slot's release row. It adds the room it gives back to the slot's delta row of
-- the current generation (gen = forgeyard.now() in units of 100 ms since 1970), updated in place,
-- so under a held snapshot an ack walks at most one generation's versions of one row, not every
-- version since the snapshot was taken. The first ack of a generation in a slot folds the older
-- generations' rows into the release row (once per generation, not per ack); maintain() folds
-- what is left, and the rows of a library before 0.11.0 (gen NULL: a session that loaded it
-- before the update still inserts them). A slot's usage is unchanged: admitted less its release
-- row and all its deltas.
ALTER TABLE forgeyard.queue_release_deltas ADD COLUMN gen bigint;
ALTER TABLE forgeyard.queue_release_deltas SET (fillfactor = 50);
COMMENT ON COLUMN forgeyard.queue_release_deltas.gen IS
  'The generation the room was given back in: forgeyard.now() in units of 100 ms since 1970 (NULL: a library before 0.11.0, still loaded by a session after the update). An ack updates a row of its generation in place (or adds one when every row of it is held); the older generations are folded into the release row.';
DROP INDEX forgeyard.queue_release_deltas_slot;
CREATE INDEX queue_release_deltas_slot ON forgeyard.queue_release_deltas (tenant_id, queue, slot, gen);
COMMENT ON TABLE forgeyard.queue_release_deltas IS
  'Messages and bytes that left a capacity slot (acked or dead-lettered), per generation of 100 ms: folded into the slot''s queue_releases row by the first ack of a later generation, or by maintain().';
ALTER TABLE forgeyard.queue_releases ADD COLUMN folded_gen bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN forgeyard.queue_releases.folded_gen IS
  'Where an ack''s fold of older generations starts: every delta row below it that the last fold saw was folded (a row it did not see, of a transaction then open, is folded by maintain()).';
COMMENT ON TABLE forgeyard.queue_releases IS
  'Messages and bytes that left each capacity slot (acked or dead-lettered) up to its last fold: the consumers'' side of the bound, with the slot''s queue_release_deltas rows.';
