// chunked_map from Drizzle ORM (node-postgres): the stored functions through Drizzle's `sql`
// template (parameters, never string-built SQL) with typed results, 40001 retried, a wrong
// expected sequence a domain error.
//
//   DATABASE_URL=postgresql://... node dist/subscribers.js [MAP] [COUNT] [CHUNK_SIZE]
//
// Prints one JSON object: the sequences appended, the retries it took, every record read back
// through chunked_records, and what an optimistic append after the wrong sequence raised.

import { sql } from "drizzle-orm";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import pg from "pg";

type Db = NodePgDatabase<Record<string, never>>;

export class MapBusy extends Error {}
/** An optimistic append found another newest sequence: decide again, do not retry. */
export class UnexpectedLastSeq extends Error {}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The SQLSTATE of a database error, whether Drizzle wraps it or not. */
function sqlstate(error: unknown): string | undefined {
  const e = error as { code?: string; cause?: { code?: string } };
  return e.code ?? e.cause?.code;
}

function message(error: unknown): string {
  const e = error as { message?: string; cause?: { message?: string } };
  return e.cause?.message ?? e.message ?? String(error);
}

/** Appends one record in its own transaction; retries 40001 with jittered backoff. */
export async function register(
  db: Db,
  map: string,
  payload: unknown,
  expectedLastSeq?: number,
  attempts = 12,
): Promise<{ seq: number; retries: number }> {
  const body = JSON.stringify(payload);
  const call =
    expectedLastSeq === undefined
      ? sql`SELECT chunked_map.chunked_register(${map}, ${body}::jsonb) AS seq`
      : sql`SELECT chunked_map.chunked_register(${map}, ${body}::jsonb, ${expectedLastSeq}::bigint) AS seq`;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      const seq = await db.transaction(async (tx) => {
        const result = await tx.execute<{ seq: string }>(call);
        return Number(result.rows[0].seq);
      });
      return { seq, retries: attempt };
    } catch (error) {
      if (sqlstate(error) === "23000") throw new UnexpectedLastSeq(message(error));
      if (sqlstate(error) !== "40001") throw error;
      await sleep(Math.random() * 2 * 2 ** attempt);
    }
  }
  throw new MapBusy(map);
}

interface Row {
  seq: number;
  payload: unknown;
}

/** Every page's token and rows, newest first, following next_page_token. */
async function* pages(db: Db, map: string): AsyncGenerator<{ token: string; rows: Row[] }> {
  let token: string | null = "current";
  while (token !== null) {
    const page: { rows: { next: string | null }[] } = await db.execute<{ next: string | null }>(
      sql`SELECT chunked_map.chunked_page(${map}, ${token}) ->> 'next_page_token' AS next`,
    );
    const rows = await db.execute<{ seq: string; payload: unknown }>(
      sql`SELECT seq, payload FROM chunked_map.chunked_records(${map}, ${token})`,
    );
    yield { token, rows: rows.rows.map((r) => ({ seq: Number(r.seq), payload: r.payload })) };
    token = page.rows[0].next;
  }
}

async function main() {
  const [map = "subscribers", count = "10", chunkSize = "3"] = process.argv.slice(2);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
  const db: Db = drizzle(pool);
  try {
    await db.execute(sql`SELECT chunked_map.chunked_start(${map}, ${Number(chunkSize)}::integer)`);
    const appended: number[] = [];
    let retries = 0;
    for (let i = 1; i <= Number(count); i++) {
      const result = await register(db, map, { email: `user${i}@example.com`, n: i });
      appended.push(result.seq);
      retries += result.retries;
    }
    let optimistic = "appended";
    try {
      await register(db, map, { late: true }, appended[appended.length - 1] - 1);
    } catch (error) {
      if (!(error instanceof UnexpectedLastSeq)) throw error;
      optimistic = `UnexpectedLastSeq: ${error.message}`;
    }
    const read = [];
    for await (const page of pages(db, map)) read.push(page);
    console.log(
      JSON.stringify({
        appended,
        retries,
        pages: read.map((p) => p.token),
        records: read.flatMap((p) => p.rows),
        optimistic,
      }),
    );
  } finally {
    await pool.end();
  }
}

await main();
