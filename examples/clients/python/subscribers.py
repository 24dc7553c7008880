"""chunked_map from Python (psycopg 3): start a map, append with a retry loop on 40001, and
page from 'current' back to the oldest chunk.

    DATABASE_URL=postgresql://... python subscribers.py [MAP] [COUNT] [CHUNK_SIZE]

Prints one JSON object: the sequences appended, the retries it took, and every record read.
"""

import json
import os
import random
import sys
import time

import psycopg
from psycopg.types.json import Jsonb


def register(conn, map_name, payload, attempts=12):
    """Appends one record in its own transaction, retrying on 40001 with jittered backoff.
    Returns (sequence number, retries)."""
    for attempt in range(attempts):
        try:
            with conn.transaction():
                row = conn.execute(
                    "SELECT chunked_map.chunked_register(%s, %s)", (map_name, Jsonb(payload))
                ).fetchone()
                return row[0], attempt
        except psycopg.errors.SerializationFailure:
            # another transaction is appending to this map: back off and retry
            time.sleep(random.uniform(0, 0.002 * 2**attempt))
    raise RuntimeError(f"map {map_name!r} still busy after {attempts} attempts")


def pages(conn, map_name):
    """Every page of the map, newest first, following next_page_token."""
    token = "current"
    while token is not None:
        (page,) = conn.execute(
            "SELECT chunked_map.chunked_page(%s, %s)", (map_name, token)
        ).fetchone()
        yield page
        token = page["next_page_token"]


def main():
    map_name = sys.argv[1] if len(sys.argv) > 1 else "subscribers"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    chunk_size = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("SELECT chunked_map.chunked_start(%s, %s)", (map_name, chunk_size))
        appended, retries = [], 0
        for i in range(1, count + 1):
            seq, tries = register(conn, map_name, {"email": f"user{i}@example.com", "n": i})
            appended.append(seq)
            retries += tries
        read = list(pages(conn, map_name))
    print(json.dumps({
        "appended": appended,
        "retries": retries,
        "pages": [page["page_token"] for page in read],
        "records": [record for page in read for record in page["records"]],
    }))


if __name__ == "__main__":
    main()
