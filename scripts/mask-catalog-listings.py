"""Cuts out, in place, the two results of PostgreSQL's regression suite that list objects of
the whole database: every SECURITY DEFINER function (opr_sanity) and every event trigger
(event_trigger). In a database where chunked_map is installed they list its own, as they would
any extension's. Each listing is the result table that follows its query, up to "(N rows)";
it is replaced by one line, so that everything else in the two files is still compared.

    python3 mask-catalog-listings.py RESULT_FILE ...
"""

import re
import sys

# The last line of each listing query, as psql echoes it.
QUERIES = {
    "opr_sanity.out": ["WHERE prosecdef", "ORDER BY 1;"],
    "event_trigger.out": ["  ORDER BY e.evtname;"],
}


def mask(path):
    name = path.rsplit("/", 1)[-1]
    query = QUERIES[name]
    with open(path) as f:
        lines = f.read().split("\n")
    out, i, masked = [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i : i + len(query)] == query:
            out.extend(lines[i + 1 : i + len(query)])
            i += len(query)
            while i < len(lines) and not re.fullmatch(r"\(\d+ rows?\)", lines[i]):
                i += 1
            out.append("(listing of the database's objects cut out)")
            masked += 1
        i += 1
    if masked != 1:
        sys.exit(f"{path}: the listing query was found {masked} times, expected once")
    with open(path, "w") as f:
        f.write("\n".join(out))


for path in sys.argv[1:]:
    mask(path)
