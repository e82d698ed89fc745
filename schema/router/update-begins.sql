/*
 * schema/router/update-begins.sql
 *		The first part of every update of delaysched_router: the line psql
 *		stops at.  (The router's updates are built by the Makefile as the
 *		node's are, between the halves of keep-privileges.)
 */

\echo Use "ALTER EXTENSION delaysched_router UPDATE TO '0.3'" to load this file. \quit
