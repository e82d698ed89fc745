#!/usr/bin/env bash
# scripts/demo.sh: watch delaysched deliver tasks on time.
#
# Installs what is missing (as root), builds and installs the extension,
# starts a throwaway PostgreSQL cluster in /tmp (unix socket only), schedules
# a handful of tasks over the next few seconds and shows each one arriving at
# a LISTEN client with its lateness, and a few webhooks arriving at a local
# receiver (test/http_receiver.py), one of them retried, SQL jobs run as an
# ordinary role (one-shot and every second), a recurring schedule firing
# every second, and a preview of a readable rule.  Removes the
# cluster when done.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
exec 2>&1

ensure_packages
build_and_install "$root"

listener_pid=""
receiver_pid=""

cleanup() {
	[ -n "$listener_pid" ] && pkill -P "$listener_pid" 2>/dev/null || true
	[ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null || true
	stop_throwaway_cluster
}
trap cleanup EXIT

log "starting a throwaway cluster"
start_throwaway_cluster 54329
sql() { cluster_sql "$@"; }

sql -c "SELECT sched.define_biz('order_timeout')" \
	-c "SELECT sched.define_biz('coupon_reminder', ack_timeout => '10 seconds')" >/dev/null

log "a webhook receiver (test/http_receiver.py) listens on 127.0.0.1"
python3 "$root/test/http_receiver.py" --port-file "$CLUSTER_DIR/receiver.port" \
	--log "$CLUSTER_DIR/receiver.log" >/dev/null 2>&1 &
receiver_pid=$!
until [ -s "$CLUSTER_DIR/receiver.port" ]; do sleep 0.05; done
port=$(cat "$CLUSTER_DIR/receiver.port")
sql -c "SELECT sched.define_biz('order_paid_hook', 'http', url => 'http://127.0.0.1:$port/ok/paid',
	        secret => 'demo-secret-0123456789')" \
	-c "SELECT sched.define_biz('flaky_hook', 'http', url => 'http://127.0.0.1:$port/status/503,200/flaky',
	        min_backoff => '300 ms')" >/dev/null

log "a LISTEN client (test/dslisten) waits on channels order_timeout and coupon_reminder"
# It exits by itself after the 11 deliveries it expects (or after 30 s).
as_pg_user "$root/test/dslisten" --pretty --ack --count 11 --timeout 30 \
	"$(cluster_conninfo)" order_timeout coupon_reminder &
listener_pid=$!
until [ "$(sql -At -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %coupon_reminder%' AND state = 'idle'")" -ge 1 ]; do
	sleep 0.05
done

log "scheduling 12 tasks due over the next 8 seconds, one overdue, one cancelled, one rescheduled; 4 webhooks"
sql <<'SQL'
\pset footer off
SELECT sched.add(biz, due, payload) AS id, biz AS biz_type,
	   to_char(due, 'HH24:MI:SS.MS') AS due, payload
FROM (
	SELECT 'order_timeout' AS biz, clock_timestamp() + i * interval '650 milliseconds' AS due,
		   jsonb_build_object('order', 1000 + i) AS payload
	FROM generate_series(1, 10) AS i
	UNION ALL
	SELECT 'coupon_reminder', clock_timestamp() + interval '2.5 seconds', '{"user": 7, "coupon": "XMAS"}'
	UNION ALL
	SELECT 'order_timeout', now() - interval '1 minute', '{"order": 999, "note": "overdue"}'
	UNION ALL
	SELECT 'order_paid_hook', clock_timestamp() + i * interval '1 second', jsonb_build_object('paid', 2000 + i)
	FROM generate_series(1, 3) AS i
	UNION ALL
	SELECT 'flaky_hook', clock_timestamp() + interval '1.5 seconds', '{"note": "answers 503 once"}'
) AS wanted
ORDER BY wanted.due;

SELECT sched.cancel(id) AS cancelled_order_1004
FROM sched.tasks WHERE payload = '{"order": 1004}';
SELECT sched.reschedule(id, clock_timestamp() + interval '7.5 seconds') AS rescheduled_order_1002
FROM sched.tasks WHERE payload = '{"order": 1002}';
SQL

log "deliveries as they arrive:"
if ! wait "$listener_pid"; then
	echo "demo: the deliveries did not all arrive within 30 s" >&2
	exit 1
fi
listener_pid=""

until [ "$(sql -At -c "SELECT count(*) FROM sched.tasks WHERE biz_type LIKE '%_hook' AND state = 'done'")" -ge 4 ]; do
	sleep 0.1
done
log "webhooks as the receiver got them (the flaky one twice: 503, then 200)"
python3 - "$CLUSTER_DIR/receiver.log" <<'PY'
import json, sys, time
for line in open(sys.argv[1]):
    r = json.loads(line)
    h = r["headers"]
    print("%s.%03d  POST %-24s Idempotency-Key %-6s attempt %s  %s" % (
        time.strftime("%H:%M:%S", time.localtime(r["t"])), int(r["t"] * 1000) % 1000, r["path"],
        h.get("idempotency-key"), h.get("x-delaysched-attempt"),
        "signed " + h["x-delaysched-signature"][:15] + "..." if "x-delaysched-signature" in h else ""))
PY

log "SQL jobs of type maintenance, run by the SQL workers as role demo_app: one-shot in 1 s, and every second"
sql >/dev/null <<'SQL'
CREATE ROLE demo_app NOLOGIN;
CREATE TABLE demo_runs (job text, run_by name DEFAULT current_user, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT ON demo_runs TO demo_app;
GRANT USAGE ON SCHEMA sched TO demo_app;
GRANT EXECUTE ON FUNCTION sched.add_sql(text, timestamptz, text, text, text, int),
	sched.define_schedule(text, text, text, jsonb, text, text, timestamptz, timestamptz, boolean, text, int) TO demo_app;
SELECT sched.define_biz('maintenance', delivery => 'sql', timeout => '1 minute');
SELECT sched.grant_biz('maintenance', 'demo_app');
SQL
sql <<'SQL'
\pset footer off
SET ROLE demo_app;
SELECT sched.add_sql('maintenance', now() + interval '1 second',
                     $$INSERT INTO demo_runs (job) VALUES ('one-shot')$$) AS job_id;
SELECT sched.define_schedule('log_every_second', 'maintenance', '* * * * * *',
                             command => $$INSERT INTO demo_runs (job) VALUES ('every second')$$) AS first_run;
SQL
deadline=$((SECONDS + 15))
until [ "$(sql -At -c "SELECT count(*) FILTER (WHERE job = 'one-shot') >= 1
                        AND count(*) FILTER (WHERE job = 'every second') >= 3 FROM demo_runs")" = t ]; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "demo: the SQL jobs did not run within 15 s" >&2
		exit 1
	fi
	sleep 0.1
done
sql -c "SELECT sched.drop_schedule('log_every_second')" >/dev/null
sql <<'SQL'
\pset footer off
SELECT r.job, r.run_by, to_char(r.at, 'HH24:MI:SS.MS') AS ran_at,
       round(extract(epoch FROM r.at - t.run_at) * 1000, 1) AS late_ms
FROM demo_runs r
JOIN sched.attempts a ON a.started_at <= r.at AND r.at <= a.started_at + a.duration
JOIN sched.tasks t ON t.id = a.id
ORDER BY r.at;
SQL

log "a recurring schedule, '* * * * * *' (every second), on type heartbeat: three firings"
sql -c "SELECT sched.define_biz('heartbeat')" >/dev/null
as_pg_user "$root/test/dslisten" --pretty --ack --count 3 --timeout 15 "$(cluster_conninfo)" heartbeat &
listener_pid=$!
until [ "$(sql -At -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %heartbeat%' AND state = 'idle'")" -ge 1 ]; do
	sleep 0.05
done
sql -c "SELECT sched.define_schedule('every_second', 'heartbeat', '* * * * * *') AS first_firing"
if ! wait "$listener_pid"; then
	echo "demo: the schedule's firings did not arrive within 15 s" >&2
	exit 1
fi
listener_pid=""
sql <<'SQL'
\pset footer off
SELECT name, schedule, to_char(next_run_at, 'HH24:MI:SS') AS next_run, runs, missed FROM sched.schedules;
SQL
log "previewing a readable rule: every 2 months on the 3rd, 5th and 23rd at 18:00, Shanghai time"
sql <<'SQL'
\pset footer off
SELECT to_char(t AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM-DD HH24:MI Dy') AS shanghai
FROM sched.next_runs('{"every": 2, "unit": "month", "days": [3, 5, 23], "at": "18:00"}',
                     'Asia/Shanghai', '2022-03-23 17:59:59+08', 6, '2022-03-23 18:00+08') AS t;
SQL

log "what the database says now"
sql <<'SQL'
\pset footer off
SELECT id, biz_type, state, attempt, to_char(run_at, 'HH24:MI:SS.MS') AS due,
	   round(extract(epoch FROM delivered_at - run_at) * 1000, 1) AS late_ms
FROM sched.tasks ORDER BY run_at;
SELECT biz_type, pending, awaiting_ack, done, dead, delivered_per_sec,
	   round(extract(epoch FROM lateness_p50) * 1000, 1) AS p50_ms,
	   round(extract(epoch FROM lateness_p99) * 1000, 1) AS p99_ms
FROM sched.biz_stats;
SELECT id, attempt, http_status, outcome, round(extract(epoch FROM duration) * 1000, 1) AS ms, error
FROM sched.attempts ORDER BY started_at;
SELECT worker, role, state, delivered, ticks FROM sched.workers ORDER BY worker;
SELECT count(*) AS ranges, min(pointer) AS oldest_pointer, max(lag) AS max_lag FROM sched.time_pointer;
SQL
log "done; the throwaway cluster is removed"
