/*-------------------------------------------------------------------------
 *
 * guc.h
 *		The delaysched.* configuration parameters.
 *
 * IDENTIFICATION
 *	  src/base/guc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELAYSCHED_GUC_H
#define DELAYSCHED_GUC_H

extern char *delaysched_databases;
extern char *delaysched_database;
extern char *delaysched_router_database;
extern int	delaysched_router_follow_interval_ms;
extern int	delaysched_max_databases;
extern int	delaysched_max_workers;
extern int	delaysched_batch_size;
extern int	delaysched_sweep_interval_ms;
extern int	delaysched_retention_s;
extern int	delaysched_dead_retention_s;
extern int	delaysched_xmin_warning_s;
extern int	delaysched_buckets;
extern int	delaysched_ranges;
extern int	delaysched_workers;
extern int	delaysched_max_payload_kb;
extern int	delaysched_max_biz_types;
extern int	delaysched_max_keys;
extern int	delaysched_max_stats_types;
extern double delaysched_max_deliveries_per_second;
extern bool delaysched_load_control;
extern bool delaysched_consumer_pace;
extern double delaysched_load_max_slowdown;
extern double delaysched_load_min_deliveries_per_second;
extern int	delaysched_load_max_standby_lag_kb;
extern int	delaysched_load_standbys;

/* delaysched.load_standbys: whose replay lag load control watches. */
typedef enum LoadStandbys
{
	LOAD_STANDBYS_SYNCHRONOUS,	/* those synchronous_standby_names lists */
	LOAD_STANDBYS_ALL			/* every streaming physical standby */
} LoadStandbys;
extern int	delaysched_http_workers;
extern int	delaysched_http_max_in_flight;
extern int	delaysched_http_max_in_flight_per_host;
extern int	delaysched_sql_workers;
extern int	delaysched_full_sweep_interval_ms;
extern int	delaysched_extension_recheck_ms;
extern int	delaysched_debug_commit_wakeup_delay_ms;

extern void delaysched_define_gucs(void);
extern bool delaysched_database_listed(const char *name);
extern bool delaysched_database_is_set(void);

#endif							/* DELAYSCHED_GUC_H */
