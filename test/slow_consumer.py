#!/usr/bin/env python3
"""A LISTEN consumer that grows slower: the consumer of TAP 035 (consumer pace).

usage: slow_consumer.py [--start-ms MS] [--end-ms MS] [--ramp-s S] --count N
                        [--timeout S] CONNINFO CHANNEL

It LISTENs on CHANNEL, prints "listening", then works through the
notifications one at a time, in the order they came, as a consumer with one
worker does: each takes a time that grows from --start-ms to --end-ms over
the first --ramp-s seconds of work, and is then acknowledged with
sched.ack(id).  One line per task worked:

    RECEIVED_US <TAB> ACKED_US <TAB> ID <TAB> ATTEMPT <TAB> t|f <TAB> WAITING

(t|f: what sched.ack answered; WAITING: notifications received and not yet
worked).  It exits 0 once --count acknowledgements were answered true (and
prints "max_waiting N", the most that waited at once), 2 when --timeout
passes first.
"""
import argparse
import collections
import json
import select
import sys
import time

import psycopg2
import psycopg2.extensions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--start-ms', type=float, default=10)
    parser.add_argument('--end-ms', type=float, default=200)
    parser.add_argument('--ramp-s', type=float, default=8)
    parser.add_argument('--count', type=int, required=True)
    parser.add_argument('--timeout', type=float, default=300)
    parser.add_argument('conninfo')
    parser.add_argument('channel')
    args = parser.parse_args()

    conn = psycopg2.connect(args.conninfo)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute('LISTEN ' + psycopg2.extensions.quote_ident(args.channel, cur))
    print('listening', flush=True)

    waiting = collections.deque()
    started = None
    acked = 0
    max_waiting = 0
    deadline = time.monotonic() + args.timeout
    while acked < args.count and time.monotonic() < deadline:
        if not waiting:
            select.select([conn], [], [], 0.5)
        conn.poll()
        while conn.notifies:
            note = conn.notifies.pop(0)
            waiting.append((time.time(), json.loads(note.payload)))
        max_waiting = max(max_waiting, len(waiting))
        if not waiting:
            continue
        if started is None:
            started = time.monotonic()
        received, message = waiting.popleft()
        ramp = min(1.0, (time.monotonic() - started) / args.ramp_s)
        time.sleep((args.start_ms + (args.end_ms - args.start_ms) * ramp) / 1000.0)
        cur.execute('SELECT sched.ack(%s)', (message['id'],))
        answered = cur.fetchone()[0]
        if answered:
            acked += 1
        print('%d\t%d\t%d\t%d\t%s\t%d' % (received * 1e6, time.time() * 1e6, message['id'],
                                          message['attempt'], 't' if answered else 'f',
                                          len(waiting)), flush=True)
    print('max_waiting %d' % max_waiting, flush=True)
    return 0 if acked >= args.count else 2


if __name__ == '__main__':
    sys.exit(main())
