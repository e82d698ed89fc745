#!/usr/bin/env python3
"""
consumer.py - an example consumer for delaysched behind a delaysched_router.

NOTIFY delivery stays per node: each node's workers send its tasks on the
type's channel to the sessions listening *on that node*.  So a consumer
listens on every node, and acknowledges through the router, which sends
each id to the node that made it (doc/scale-out.md).

    python3 consumer.py --router 'host=r dbname=app' \
        --node 'host=n1 dbname=app' --node 'host=n2 dbname=app' --channel orders

Each message's id is printed on a line of its own (--quiet: not), and
acknowledged with sched.ack_many in batches of up to --batch ids, one node's
ids at a time (an id carries its node).  A node that goes away is listened
to again when it is back, and its ids are acknowledged then (tasks it
delivered meanwhile come again after their ack_timeout).  Stops after
--count tasks (all acknowledged), or after --idle seconds without one.

Needs psycopg2 (Debian: python3-psycopg2).
"""

import argparse
import json
import select
import sys
import time

import psycopg2
import psycopg2.extensions


class NodeListener:
    """One LISTEN session on one node, opened again after it is lost."""

    def __init__(self, conninfo, channel):
        self.conninfo = conninfo
        self.channel = channel
        self.conn = None
        self.next_try = 0.0

    def ensure(self):
        if self.conn is not None or time.monotonic() < self.next_try:
            return
        try:
            conn = psycopg2.connect(self.conninfo)
            conn.set_isolation_level(psycopg2.extensions.ISOLATION_LEVEL_AUTOCOMMIT)
            with conn.cursor() as cur:
                cur.execute("LISTEN %s" % psycopg2.extensions.quote_ident(self.channel, conn))
            self.conn = conn
        except psycopg2.Error as e:
            print("consumer: cannot listen on %s: %s" % (self.conninfo, str(e).strip()),
                  file=sys.stderr)
            self.next_try = time.monotonic() + 1.0

    def drop(self, error):
        print("consumer: lost %s: %s" % (self.conninfo, str(error).strip()), file=sys.stderr)
        try:
            self.conn.close()
        except psycopg2.Error:
            pass
        self.conn = None
        self.next_try = time.monotonic() + 1.0

    def take(self):
        """The messages that arrived, as dicts."""
        try:
            self.conn.poll()
        except psycopg2.Error as e:
            self.drop(e)
            return []
        messages = [json.loads(n.payload) for n in self.conn.notifies]
        del self.conn.notifies[:]
        return messages


def ack(router, conninfo, ids, batch):
    """Acknowledge ids through the router, one node's ids at a time (an id
    carries its node: id >> 48), in batches.  The ids of a node that cannot
    be reached stay in ids for the next turn, and do not hold back the
    others (a task whose lease runs out meanwhile comes again).  Returns the
    router connection, opened again if it was lost."""
    by_node = {}
    for i in ids:
        by_node.setdefault(i >> 48, []).append(i)
    left = []
    for node, node_ids in sorted(by_node.items()):
        try:
            if router is None or router.closed:
                router = psycopg2.connect(conninfo)
                router.set_isolation_level(psycopg2.extensions.ISOLATION_LEVEL_AUTOCOMMIT)
            with router.cursor() as cur:
                while node_ids:
                    cur.execute("SELECT sched.ack_many(%s::bigint[])", (node_ids[:batch],))
                    del node_ids[:batch]
        except psycopg2.Error as e:
            print("consumer: acknowledging on node %d: %s" % (node, str(e).strip().splitlines()[0]),
                  file=sys.stderr)
            left.extend(node_ids)
            if router is not None and router.closed:
                router = None
    ids[:] = left
    return router


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--router", required=True, help="conninfo of the router database")
    ap.add_argument("--node", action="append", required=True, help="conninfo of a node (repeat)")
    ap.add_argument("--channel", required=True, help="the business type's channel")
    ap.add_argument("--batch", type=int, default=500, help="ids per sched.ack_many call")
    ap.add_argument("--count", type=int, default=0, help="stop after this many tasks")
    ap.add_argument("--idle", type=float, default=0, help="stop after this many seconds without a task")
    ap.add_argument("--quiet", action="store_true", help="do not print the ids")
    args = ap.parse_args()

    router = psycopg2.connect(args.router)
    router.set_isolation_level(psycopg2.extensions.ISOLATION_LEVEL_AUTOCOMMIT)
    listeners = [NodeListener(c, args.channel) for c in args.node]
    for listener in listeners:
        listener.ensure()
    # Tell whoever started us that every node is listened to.
    print("consumer: listening on %d nodes" % sum(l.conn is not None for l in listeners),
          file=sys.stderr, flush=True)

    received = 0
    pending_acks = []
    last = time.monotonic()
    while True:
        for listener in listeners:
            listener.ensure()
        live = [l for l in listeners if l.conn is not None]
        ready = select.select([l.conn for l in live], [], [], 0.2)[0] if live else time.sleep(0.2)
        ids = []
        for listener in live:
            if ready and listener.conn in ready:
                for message in listener.take():
                    ids.append(message["id"])
        if ids:
            last = time.monotonic()
            received += len(ids)
            if not args.quiet:
                sys.stdout.write("".join("%d\n" % i for i in ids))
                sys.stdout.flush()
            pending_acks.extend(ids)
        if pending_acks:
            router = ack(router, args.router, pending_acks, args.batch)
        if args.count and received >= args.count and not pending_acks:
            break
        if args.idle and time.monotonic() - last > args.idle:
            break
    print("consumer: %d tasks received, %d acknowledged" % (received, received - len(pending_acks)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
