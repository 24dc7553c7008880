"""message-db-py 0.3.5 (PyPI), unchanged, against chunked_map_message_store: writes, reads a
stream and a category (with a consumer group), meets the expected-version error, reads the last
message. Prints one line per check; exits non-zero at the first that fails.
Usage: python client_check.py postgresql://message_store@HOST:PORT/DATABASE"""

import sys

from message_db.client import MessageDB


def check(label, condition, detail=""):
    if not condition:
        print(f"FAILED: {label} {detail}")
        sys.exit(1)
    print(f"ok: {label}")


db = MessageDB.from_url(sys.argv[1])

check("first write is position 0", db.write("order-1", "Placed", {"n": 1}) == 0)
check(
    "write with the expected version",
    db.write("order-1", "Paid", {"n": 2}, {"correlationStreamName": "payment-9"}, expected_version=0) == 1,
)
try:
    db.write("order-1", "Shipped", {"n": 3}, expected_version=0)
    check("a wrong expected version is refused", False)
except ValueError as error:
    check(
        "a wrong expected version is refused as message-db refuses it",
        str(error).startswith("P0001-ERROR:  Wrong expected version: 0 (Stream: order-1, Stream Version: 1)"),
        str(error),
    )
check("a batch", db.write_batch("order-2", [("Placed", {"n": 1}), ("Paid", {"n": 2})]) == 1)
db.write("order-3", "Placed", {"n": 1})
db.write("payment-9", "Received", {"amount": 10})

stream = db.read_stream("order-1")
check("a stream in position order", [m["position"] for m in stream] == [0, 1], stream)
check("data and metadata as message-db gives them", stream[1]["data"] == {"n": 2} and stream[1]["metadata"] == {"correlationStreamName": "payment-9"}, stream)

category = db.read_category("order")
check("a category", sorted((m["stream_name"], m["position"]) for m in category) == [("order-1", 0), ("order-1", 1), ("order-2", 0), ("order-2", 1), ("order-3", 0)], category)
positions = [m["global_position"] for m in category]
check("in global position order", positions == sorted(positions), positions)
resumed = db.read_category("order", position=positions[2] + 1)
check("resumed from a global position + 1", [m["global_position"] for m in resumed] == positions[3:], resumed)

members = [db.read_category("order", consumer_group_member=m, consumer_group_size=2) for m in (0, 1)]
seen = [(m["stream_name"], m["position"]) for member in members for m in member]
check("a consumer group splits the category, each message once", sorted(seen) == sorted((m["stream_name"], m["position"]) for m in category), members)
for member in members:
    check("a stream to one member", len({m["stream_name"] for m in member} & {m["stream_name"] for other in members if other is not member for m in other}) == 0)

last = db.read_last_message("order-1")
check("the last message", last is not None and last["type"] == "Paid" and last["position"] == 1, last)
check("all messages, through the messages relation", len(db.read("$all")) == 6)
print("message-db-py: every check passed")
