-------------------------------------------------------------------------------
-- The schema (created by CREATE EXTENSION: "schema = sched" in the control file)
-------------------------------------------------------------------------------

COMMENT ON SCHEMA sched IS 'delaysched: delayed and recurring tasks delivered by NOTIFY, pull or HTTP';
