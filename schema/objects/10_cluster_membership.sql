-------------------------------------------------------------------------------
-- Cluster membership (the delaysched_router extension, doc/scale-out.md).
-- A node's number is the high part of every task id it makes:
--   id = node * 2^48 + (nextval * buckets + bucket)
-- The sequence itself carries it (its values are kept by pg_dump).
-------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched.node_number() RETURNS int
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ((s.last_value * sched._bucket_count()) >> 48)::int FROM sched.task_seq s $$;
COMMENT ON FUNCTION sched.node_number() IS 'the node number this database''s task ids carry (0 until sched.set_node_number)';

-- What a router asks before numbering a node: its number, whether it has
-- made task ids, and whether it has joined a cluster (its sequence bounded
-- to its block; node 0 is bounded when it joins).  For administrators, as
-- sched.set_node_number is; run as its caller, as internal functions are.
CREATE OR REPLACE FUNCTION sched._node_state(OUT node int, OUT made_ids boolean, OUT joined boolean)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT sched.node_number(), s.is_called, q.seqmax < 9223372036854775807
	FROM sched.task_seq s, pg_catalog.pg_sequence q
	WHERE q.seqrelid = 'sched.task_seq'::pg_catalog.regclass
$$;
COMMENT ON FUNCTION sched._node_state() IS 'internal: a node''s number, whether it has made ids, whether it has joined a cluster';

CREATE OR REPLACE FUNCTION sched.set_node_number(node int) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n bigint := sched._bucket_count();
	s record;
	v_low bigint;
	v_high bigint;
BEGIN
	PERFORM sched._require(node, 'node');
	IF node < 0 OR node > 32767 THEN
		RAISE EXCEPTION 'node number must be between 0 and 32767, not %', node
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Serialise with other calls (a sequence cannot be locked; this mode of
	-- sched.biz conflicts with itself and define_biz, not with adds).
	LOCK TABLE sched.biz IN SHARE ROW EXCLUSIVE MODE;
	s := sched._node_state();
	IF s.node <> 0 AND s.node <> set_node_number.node THEN
		RAISE EXCEPTION 'this database is node % already', s.node
			USING ERRCODE = 'object_in_use',
				  HINT = 'A node keeps its number: the ids of its tasks carry it.';
	END IF;
	IF s.node = set_node_number.node AND s.joined THEN
		RETURN false;
	END IF;
	IF set_node_number.node <> 0 AND s.made_ids THEN
		RAISE EXCEPTION 'this database has made task ids as node 0: it can only be node 0'
			USING ERRCODE = 'object_in_use',
				  HINT = 'Under another number its earlier ids would be taken for node 0''s.';
	END IF;
	-- The first and last sequence values whose ids (value * n + bucket,
	-- bucket < n) all lie in [node * 2^48, (node + 1) * 2^48).  Node 0
	-- keeps its sequence's position, bounded to its block.
	v_low := ((set_node_number.node::bigint << 48) + n - 1) / n;
	v_high := pg_catalog.floor(((set_node_number.node + 1) * 2::numeric ^ 48 - n) / n)::bigint;  -- (no overflow at 32767)
	IF set_node_number.node = 0 THEN
		EXECUTE pg_catalog.format('ALTER SEQUENCE sched.task_seq MAXVALUE %s', v_high);
	ELSE
		EXECUTE pg_catalog.format('ALTER SEQUENCE sched.task_seq MINVALUE %s MAXVALUE %s START %s RESTART %s',
								  v_low, v_high, v_low, v_low);
	END IF;
	RETURN true;
END
$$;
COMMENT ON FUNCTION sched.set_node_number(int) IS 'make this database node number "node" of a delaysched_router cluster: its new task ids carry the number; false if it had it already';

/*
 * A router that follows its nodes (delaysched_router's sched.follow_nodes)
 * leases each node its shares of the split limits at every round, for
 * p_seconds; the first lease marks the node followed (sched.router_follow),
 * and from then on a type with a rate limit or a concurrency cap delivers
 * nothing while no lease is in force (src/cluster/share_lease.c).  For
 * administrators: run as its caller, as internal functions are.
 */
CREATE OR REPLACE FUNCTION sched._set_share_lease(seconds float8) RETURNS timestamptz
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_set_share_lease_sql';
COMMENT ON FUNCTION sched._set_share_lease(float8) IS 'internal: lease this node its shares of the split limits for so many seconds';

CREATE OR REPLACE FUNCTION sched._share_lease_until() RETURNS timestamptz
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_share_lease_until_sql';
COMMENT ON FUNCTION sched._share_lease_until() IS 'internal: until when this node''s shares of the split limits are leased (NULL: never since the start)';

CREATE OR REPLACE FUNCTION sched._share_lease_left() RETURNS float8
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_share_lease_left_sql';
COMMENT ON FUNCTION sched._share_lease_left() IS 'internal: the seconds left of this node''s lease on its shares of the split limits (0: none in force)';

CREATE OR REPLACE FUNCTION sched._set_share_generation(generation bigint) RETURNS void
LANGUAGE c STRICT VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_set_share_generation_sql';
COMMENT ON FUNCTION sched._set_share_generation(bigint) IS 'internal: the router gave this node its shares of its split with this number';

CREATE OR REPLACE FUNCTION sched._share_generation() RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'delaysched_share_generation_sql';
COMMENT ON FUNCTION sched._share_generation() IS 'internal: the number of the router''s split whose shares this node was last given (0: none since the start)';

/*
 * A following router's call at every round: marks the node followed, and
 * renews its lease for p_seconds if it has its shares of split number
 * p_generation (the router passes -1 only to ask).  Returns whether it
 * renewed, the seconds left of the lease the node holds now (0: none), the
 * node's number, and the number of the split whose shares it has (0: none).
 */
CREATE OR REPLACE FUNCTION sched._share_lease(p_seconds float8, p_generation bigint,
											  OUT renewed boolean, OUT remaining float8, OUT node int,
											  OUT generation bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM sched.router_follow) THEN
		INSERT INTO sched.router_follow DEFAULT VALUES ON CONFLICT DO NOTHING;
	END IF;
	generation := sched._share_generation();
	renewed := p_generation = generation;
	IF renewed THEN
		PERFORM sched._set_share_lease(p_seconds);
	END IF;
	remaining := sched._share_lease_left();
	node := sched.node_number();
END
$$;
COMMENT ON FUNCTION sched._share_lease(float8, bigint) IS 'internal: a following router renews this node''s lease on its shares of a split, if the node has them; what is left of its lease';

-- The router stops following: the node's shares hold without a lease.
CREATE OR REPLACE FUNCTION sched._share_unfollow() RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	WITH gone AS (DELETE FROM sched.router_follow RETURNING 1) SELECT count(*) > 0 FROM gone
$$;
COMMENT ON FUNCTION sched._share_unfollow() IS 'internal: this node is no longer followed: its shares of the split limits hold without a lease';

-- Whether a type with a rate limit or a concurrency cap must wait: the node
-- is followed and its lease is not in force.
CREATE OR REPLACE FUNCTION sched._share_lapsed() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT EXISTS (SELECT FROM sched.router_follow) AND sched._share_lease_left() <= 0
$$;
COMMENT ON FUNCTION sched._share_lapsed() IS 'internal: whether this node is followed by a router and its lease on its shares is not in force';
