# Makefile for delaysched (PGXS)
#
#   make && make install        build and install the extension
#   make test-tools             the LISTEN client and the benchmark programs (test/)
#   make installcheck           pg_regress and isolation tests on a temporary instance,
#                               then the TAP tests (test/t; PROVE_FLAGS="-j 3" in parallel)
#   bash scripts/test.sh        the whole suite (regress, isolation, TAP) on every
#                               supported major, as CI runs it

MODULE_big = delaysched
OBJS = \
	src/delaysched.o \
	src/base/caller.o \
	src/base/guc.o \
	src/base/message.o \
	src/base/shmem.o \
	src/base/spi_plans.o \
	src/base/worker.o \
	src/cluster/cluster.o \
	src/cluster/launcher.o \
	src/cluster/router_follower.o \
	src/cluster/share_lease.o \
	src/cluster/utility.o \
	src/cluster/worker_views.o \
	src/core/buckets.o \
	src/core/delivery.o \
	src/core/drain.o \
	src/core/fair_walk.o \
	src/core/firsts_ahead.o \
	src/core/keys_ahead.o \
	src/core/horizon.o \
	src/core/lease.o \
	src/core/key_limiter.o \
	src/core/limiter.o \
	src/core/next_due.o \
	src/core/pace.o \
	src/core/scanner.o \
	src/core/shares.o \
	src/core/sweep.o \
	src/core/tick.o \
	src/core/tick_plans.o \
	src/core/wake.o \
	src/core/walk.o \
	src/http/http_handoff.o \
	src/http/http_perimeter.o \
	src/http/http_request.o \
	src/http/http_store.o \
	src/http/http_origins.o \
	src/http/http_transfer.o \
	src/http/http_worker.o \
	src/schedule/firing.o \
	src/schedule/schedule_next.o \
	src/schedule/schedule_parse.o \
	src/schedule/schedule_sql.o \
	src/sql/sql_command.o \
	src/sql/sql_plans.o \
	src/sql/sql_ready.o \
	src/sql/sql_run.o \
	src/sql/sql_session.o \
	src/sql/sql_signal.o \
	src/sql/sql_worker.o \
	src/stats/load.o \
	src/stats/metrics.o \
	src/stats/stats.o \
	src/stats/stats_prepared.o \
	src/stats/stats_recount.o \
	src/stats/stats_tally.o \
	src/stats/task_status.o

EXTENSION = delaysched delaysched_router
# Released scripts, frozen as they shipped.
DATA = delaysched--0.1.sql delaysched--0.2.sql delaysched--0.1--0.2.sql delaysched_router--0.2.sql
# The current version's scripts, built from schema/ (one source per section:
# see schema/install.sql): the install is the tables followed by every
# object file; an update takes its locks, notes the grants on the objects, changes the
# tables, makes the objects with the same files, and gives back the grants
# it lost.  From 0.1 it runs the released 0.1 -> 0.2 script first, inside
# the same notes, so that an update from 0.1 keeps its grants too.
SCHEMA_OBJECTS = $(sort $(wildcard $(srcdir)/schema/objects/*.sql))
UPDATE_BEGINS = $(srcdir)/schema/update/take-locks.sql $(srcdir)/schema/update/keep-privileges-save.sql
UPDATE_ENDS = $(srcdir)/schema/update/keep-privileges-restore.sql
DATA_built = delaysched--0.3.sql delaysched--0.2--0.3.sql delaysched--0.1--0.3.sql delaysched_router--0.2--0.3.sql
PGFILEDESC = "delaysched - delayed tasks delivered on time from inside PostgreSQL"

REGRESS = setup api validation claim_ack leases on_duplicate keys privileges batch pause limits consumer_pace share_lease router_calls http schedule_rules schedules pg_cron metrics statuses clock_steps catch_up sql_jobs hostile_role bad_input router
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=$(srcdir)/test/delaysched.conf \
	--load-extension=delaysched
ISOLATION = claim_race dedupe_race replace_vs_claim replace_vs_tick extend_vs_sweep key_cap_claim cancel_vs_claim drop_vs_add reschedule_vs_drop range_race tick_vs_claim reschedule_vs_claim pause_vs_tick http_claim_race schedule_vs_fire schedule_held_firing sql_job_running
ISOLATION_OPTS = --temp-instance=./tmp_check_iso --temp-config=$(srcdir)/test/isolation.conf \
	--load-extension=delaysched

# TAP tests through PGXS (prove_installcheck), from test/t; they find the
# LISTEN client at test/dslisten (make test-tools) and their module in test/perl.
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

# The router's own small library (src/router/delaysched_router.c): what
# delaysched_router calls in C, without the delaysched library, which loads
# only from shared_preload_libraries.  It talks to the nodes over libpq.
MODULES = src/router/delaysched_router

PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir)
# libcurl for the HTTP workers (package libcurl4-openssl-dev).
SHLIB_LINK = -lcurl
# -Wextra's unused-parameter fires inside PostgreSQL's own headers (bufpage.h).
# No -Werror here: a packager's newer compiler may warn where ours does not.
# Developers and CI build with `make COPT=-Werror` (scripts/lib.sh does).
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter

EXTRA_CLEAN = test/dslisten test/bench/dsbench test/bench/hooksink tmp_check tmp_check_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# (PGXS links a library of MODULES without SHLIB_LINK.)
src/router/delaysched_router$(DLSUFFIX): LDFLAGS_SL += $(libpq)

# A built script names its sources, and a blank line parts them.
define concatenate_schema
	{ echo '-- $@: built by make from the files of schema/ (see the Makefile); edit those, not this file'; \
	  awk 'FNR == 1 { print "" } { print }' $^; } > $@
endef
delaysched--0.3.sql: $(srcdir)/schema/install.sql $(SCHEMA_OBJECTS)
	$(concatenate_schema)
delaysched--0.2--0.3.sql: $(UPDATE_BEGINS) $(srcdir)/schema/update/0.2--0.3.sql $(SCHEMA_OBJECTS) $(UPDATE_ENDS)
	$(concatenate_schema)
delaysched--0.1--0.3.sql: $(UPDATE_BEGINS) $(srcdir)/delaysched--0.1--0.2.sql $(srcdir)/schema/update/0.2--0.3.sql $(SCHEMA_OBJECTS) $(UPDATE_ENDS)
	$(concatenate_schema)
# The router has no 0.3 install script: CREATE EXTENSION runs the released
# 0.2 script and this update (see schema/router/0.2--0.3.sql), which keeps
# grants as the node's updates do.
delaysched_router--0.2--0.3.sql: $(srcdir)/schema/router/update-begins.sql $(srcdir)/schema/update/keep-privileges-save.sql $(srcdir)/schema/router/0.2--0.3.sql $(UPDATE_ENDS)
	$(concatenate_schema)

# PGXS tracks no header dependencies: rebuild every object when a header changes.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

LIBPQ_CFLAGS = -I$(shell $(PG_CONFIG) --includedir)
LIBPQ_LIBS = -L$(shell $(PG_CONFIG) --libdir) -lpq

# The test and benchmark programs: not part of the extension's all or
# install, so that a packager builds only the extension.  Built with the
# CFLAGS and LDFLAGS make is given (PGXS's by default, COPT included).
TEST_TOOLS = test/dslisten test/bench/dsbench test/bench/hooksink
.PHONY: test-tools
test-tools: $(TEST_TOOLS)

# The LISTEN client and the benchmark driver (test/bench/dsbench).
test/dslisten test/bench/dsbench: %: %.c test/dsclient.h
	$(CC) $(CFLAGS) -I$(srcdir)/test $(LIBPQ_CFLAGS) -o $@ $< $(LDFLAGS) $(LIBPQ_LIBS)

# The webhook receiver of the HTTP benchmark (libc only).
test/bench/hooksink: test/bench/hooksink.c
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS)

# Benchmarks (not tests): bench/run.sh; bench-smoke is the few-second run CI does.
.PHONY: bench bench-compare bench-smoke bench-xmin bench-http bench-schedules bench-contention bench-contention-smoke bench-databases bench-databases-smoke bench-monitoring bench-monitoring-smoke bench-catch-up bench-catch-up-smoke bench-scale-out bench-scale-out-smoke bench-sql-jobs bench-sql-jobs-smoke bench-keys bench-keys-smoke bench-load bench-load-smoke
bench: all test-tools
	bash bench/run.sh
bench-compare: all test-tools
	bash bench/run.sh --compare
bench-smoke: all test-tools
	bash bench/run.sh --smoke
bench-xmin: all test-tools
	bash bench/run.sh --only xmin
bench-http: all test-tools
	bash bench/http.sh
# Schedules beside pg_cron; MAJOR=18 runs them in the sid chroot, beside pg_cron 1.6.
bench-schedules: all test-tools
	bash bench/schedules.sh $(if $(MAJOR),--major $(MAJOR))
# Shared-memory contention: this tree beside a baseline revision (BASELINE=rev).
bench-contention: all test-tools
	bash bench/contention.sh $(if $(BASELINE),--baseline $(BASELINE))
bench-contention-smoke: all test-tools
	bash bench/contention.sh --smoke $(if $(BASELINE),--baseline $(BASELINE))
bench-databases: all test-tools
	bash bench/databases.sh
bench-databases-smoke: all test-tools
	bash bench/databases.sh --smoke
bench-monitoring: all test-tools
	bash bench/monitoring.sh
bench-monitoring-smoke: all test-tools
	bash bench/monitoring.sh --smoke
# catch_up => 'all': how fast a schedule's backlog is replayed.
bench-catch-up: all
	bash bench/catch_up.sh
bench-catch-up-smoke: all
	bash bench/catch_up.sh --smoke
# delaysched_router against a node directly, and 1, 2, 3 nodes delivering.
bench-scale-out: all
	bash bench/scale_out.sh
bench-scale-out-smoke: all
	bash bench/scale_out.sh --smoke
# SQL jobs beside pg_cron: 20 every minute, 1,000 at one instant; MAJOR=18
# runs them in the sid chroot, beside pg_cron 1.6.
bench-sql-jobs: all
	bash bench/sql_jobs.sh $(if $(MAJOR),--major $(MAJOR))
bench-sql-jobs-smoke: all
	bash bench/sql_jobs.sh --smoke $(if $(MAJOR),--major $(MAJOR))
# What a key costs: sched.add and sched.claim with keys and without.
bench-keys: all
	bash bench/keys.sh
bench-keys-smoke: all
	bash bench/keys.sh --smoke
# What a burst of due tasks does to pgbench beside it, load control on and off.
bench-load: all
	bash bench/load.sh
bench-load-smoke: all
	bash bench/load.sh --smoke
