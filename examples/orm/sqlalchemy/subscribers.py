"""chunked_map from SQLAlchemy 2 (psycopg 3): the stored functions through `func`, the page rows
as a table-valued function, 40001 retried, a wrong expected sequence a domain error.

    DATABASE_URL=postgresql://... python subscribers.py [MAP] [COUNT] [CHUNK_SIZE]

Prints one JSON object: the sequences appended, the retries it took, every record read back
through chunked_records, and what an optimistic append after the wrong sequence raised.
"""

import json
import os
import random
import sys
import time

from sqlalchemy import BigInteger, column, create_engine, func, select, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

# chunked_map.chunked_records(map, page_token) as a selectable with typed columns
def records(map_name, token="current"):
    return func.chunked_map.chunked_records(map_name, token).table_valued(
        column("seq", BigInteger), column("payload", JSONB)
    )


class MapBusy(Exception):
    """Another transaction kept the map for longer than the retries."""


class UnexpectedLastSeq(Exception):
    """An optimistic append found another newest sequence: decide again, do not retry."""


def sqlstate(error):
    return getattr(error.orig, "sqlstate", None)


def register(engine, map_name, payload, expected_last_seq=None, attempts=12):
    """Appends one record in its own transaction; retries 40001 with jittered backoff.
    Returns (sequence, retries)."""
    args = [map_name, type_coerce(payload, JSONB)]
    if expected_last_seq is not None:
        args.append(expected_last_seq)
    for attempt in range(attempts):
        try:
            with Session(engine) as session, session.begin():
                seq = session.scalar(select(func.chunked_map.chunked_register(*args)))
            return seq, attempt
        except DBAPIError as error:
            if sqlstate(error) == "23000":
                raise UnexpectedLastSeq(str(error.orig)) from error
            if sqlstate(error) != "40001":
                raise
            time.sleep(random.uniform(0, 0.002 * 2**attempt))
    raise MapBusy(map_name)


def pages(engine, map_name):
    """Every page's token and its rows, newest first, following next_page_token."""
    token = "current"
    with Session(engine) as session:
        while token is not None:
            page = session.scalar(select(func.chunked_map.chunked_page(map_name, token)))
            rows = session.execute(select(records(map_name, token))).all()
            yield token, [{"seq": seq, "payload": payload} for seq, payload in rows]
            token = page["next_page_token"]


def main():
    map_name = sys.argv[1] if len(sys.argv) > 1 else "subscribers"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    chunk_size = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    url = os.environ["DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url)
    with Session(engine) as session, session.begin():
        session.execute(select(func.chunked_map.chunked_start(map_name, chunk_size)))
    appended, retries = [], 0
    for i in range(1, count + 1):
        seq, tries = register(engine, map_name, {"email": f"user{i}@example.com", "n": i})
        appended.append(seq)
        retries += tries
    try:
        register(engine, map_name, {"late": True}, expected_last_seq=appended[-1] - 1)
        optimistic = "appended"
    except UnexpectedLastSeq as error:
        optimistic = f"UnexpectedLastSeq: {error}"
    read = list(pages(engine, map_name))
    print(json.dumps({
        "appended": appended,
        "retries": retries,
        "pages": [token for token, _ in read],
        "records": [row for _, rows in read for row in rows],
        "optimistic": optimistic,
    }))


if __name__ == "__main__":
    main()
