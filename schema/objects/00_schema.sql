-------------------------------------------------------------------------------
-- The schema (created by CREATE EXTENSION: "schema = sched" in the control file)
-------------------------------------------------------------------------------

COMMENT ON SCHEMA sched IS 'delaysched: delayed tasks delivered by NOTIFY or pull';
