"""A member of a consumer group on chunked_map's feed (0.4): N of these processes share one
consumer of a category, each map belonging to one of them, every record processed once, in order
per map.

    DATABASE_URL=postgresql://... python feed_member.py CONSUMER CATEGORY MEMBER GROUP_SIZE

- The consumer's positions are the extension's: `chunked_poll` moves them in the caller's
  transaction, so the work done for the records (here: inserting them into `projection`) and
  their acknowledgement commit together. Killed at any point, the member rolls both back; started
  again, it gets the same records again, and nothing it committed.
- Each member polls with its own `member` number out of `group_size`; a map belongs to one of them
  (a stable hash of its name), so each map's records are processed in order by one process.
- It polls on an interval, backing off while polls come back empty (up to half a second), and
  never needs a notification.
- A row with `trimmed` true (its payload NULL) says records up to its sequence were trimmed
  (retention) before this consumer had them: it records the gap and goes on. (Tell it by
  `trimmed`, not by the payload: a record's payload may be JSON `null`, which Python also reads as
  None.)
- It takes every row a poll returns, and no `LIMIT` or filter on it: what a poll returns is
  acknowledged when its transaction commits, whether or not the client read it.

Runs until killed.
"""

import os
import sys
import time

import psycopg
import psycopg.types.json

BATCH = 100


def setup(conn, consumer, category):
    conn.execute(
        """CREATE TABLE IF NOT EXISTS projection (
               consumer text NOT NULL, map text NOT NULL, seq bigint NOT NULL,
               payload jsonb, trimmed boolean NOT NULL, member integer NOT NULL,
               processed_order bigserial,
               PRIMARY KEY (consumer, map, seq))"""
    )
    # idempotent: false when the consumer exists (every member calls it)
    conn.execute("SELECT chunked_map.chunked_subscribe(%s, %s)", (consumer, category))


def poll_once(conn, consumer, member, group_size):
    """One poll and its work, in one transaction. Returns how many rows it processed."""
    with conn.transaction():
        rows = conn.execute(
            "SELECT map, seq, payload, trimmed FROM chunked_map.chunked_poll(%s, %s, %s, %s)",
            (consumer, BATCH, member, group_size),
        ).fetchall()
        for map_name, seq, payload, trimmed in rows:
            # the work: here, keep the record (trimmed: a gap, kept as such)
            conn.execute(
                """INSERT INTO projection (consumer, map, seq, payload, trimmed, member)
                   VALUES (%s, %s, %s, %s, %s, %s)""",
                (
                    consumer,
                    map_name,
                    seq,
                    None if trimmed else psycopg.types.json.Jsonb(payload),
                    trimmed,
                    member,
                ),
            )
    return len(rows)


def main():
    consumer, category = sys.argv[1], sys.argv[2]
    member, group_size = int(sys.argv[3]), int(sys.argv[4])
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        with conn.transaction():
            setup(conn, consumer, category)
        pause = 0.005
        while True:
            if poll_once(conn, consumer, member, group_size):
                pause = 0.005
            else:
                time.sleep(pause)
                pause = min(pause * 2, 0.5)


if __name__ == "__main__":
    main()
