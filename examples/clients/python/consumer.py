"""A consumer of chunked_map maps: processes every record once, in order per map, and follows
the maps live.

    DATABASE_URL=postgresql://... python consumer.py CONSUMER MAP [MAP ...]

- Its position (the last sequence it processed, per map) lives in a table of its own,
  `consumer_position`, and is moved in the same transaction as the work done for the records
  (here: inserting them into `processed`). A crash at any point rolls both back together, so on
  restart it resumes exactly after the last record whose work committed: every record is
  processed once.
- It LISTENs first, on each map's own channel (`chunked_info(map) ->> 'notify_channel'`, there
  while `chunked_set_notify(map, true)` is on: a name no role can guess from the map's), then
  catches up from its position with `chunked_read` (oldest first), then reads forward again
  whenever a notification arrives on one of its channels. A notification is only a wake-up: it
  makes the consumer read from its own position, so one that arrives while it is reading, or a
  forged one, only makes it read again; nothing committed after its LISTEN can be missed.

Runs until killed.
"""

import json
import os
import sys

import psycopg
import psycopg.sql

BATCH = 100


def setup(conn):
    conn.execute(
        """CREATE TABLE IF NOT EXISTS consumer_position (
               consumer text NOT NULL, map text NOT NULL, last_seq bigint NOT NULL,
               PRIMARY KEY (consumer, map))"""
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS processed (
               consumer text NOT NULL, map text NOT NULL, seq bigint NOT NULL,
               payload jsonb NOT NULL, processed_order bigserial,
               PRIMARY KEY (consumer, map, seq))"""
    )


def drain(conn, consumer, map_name):
    """Processes the map's records after the stored position, in batches, each batch and its
    new position in one transaction. Returns how many it processed."""
    done = 0
    while True:
        with conn.transaction():
            row = conn.execute(
                """INSERT INTO consumer_position AS p VALUES (%s, %s, 0)
                   ON CONFLICT (consumer, map) DO UPDATE SET last_seq = p.last_seq
                   RETURNING last_seq""",
                (consumer, map_name),
            ).fetchone()
            position = row[0]
            records = conn.execute(
                "SELECT seq, payload FROM chunked_map.chunked_read(%s, %s, %s)",
                (map_name, position, BATCH),
            ).fetchall()
            for seq, payload in records:
                # the work: here, keep the record; anything done in this transaction
                conn.execute(
                    "INSERT INTO processed (consumer, map, seq, payload) VALUES (%s, %s, %s, %s)",
                    (consumer, map_name, seq, psycopg.types.json.Jsonb(payload)),
                )
            if records:
                conn.execute(
                    "UPDATE consumer_position SET last_seq = %s WHERE consumer = %s AND map = %s",
                    (records[-1][0], consumer, map_name),
                )
        done += len(records)
        if len(records) < BATCH:
            return done


def main():
    consumer, maps = sys.argv[1], sys.argv[2:]
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as listener, psycopg.connect(url, autocommit=True) as conn:
        setup(conn)
        by_channel = {}
        for map_name in maps:
            channel = conn.execute(
                "SELECT chunked_map.chunked_info(%s) ->> 'notify_channel'", (map_name,)
            ).fetchone()[0]
            if channel is None:
                raise SystemExit(f"map {map_name!r}: notifications are off (chunked_set_notify)")
            listener.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
            by_channel[channel] = map_name
        for map_name in maps:
            drain(conn, consumer, map_name)
        print(json.dumps({"consumer": consumer, "caught_up": True}), flush=True)
        for notification in listener.notifies():
            map_name = by_channel.get(notification.channel)
            if map_name is not None:
                drain(conn, consumer, map_name)


if __name__ == "__main__":
    main()
