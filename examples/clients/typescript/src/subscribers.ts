// chunked_map from TypeScript (node-postgres): start a map, append with a retry loop on 40001,
// and page from 'current' back to the oldest chunk.
//
//   DATABASE_URL=postgresql://... node dist/subscribers.js [MAP] [COUNT] [CHUNK_SIZE]
//
// Prints one JSON object: the sequences appended, the retries it took, and every record read.

import pg from "pg";

interface Page {
  map: string;
  page_token: string;
  records: { seq: number; payload: unknown }[];
  next_page_token: string | null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Appends one record in its own transaction, retrying on 40001 with jittered backoff. */
async function register(
  client: pg.Client,
  map: string,
  payload: unknown,
  attempts = 12,
): Promise<{ seq: number; retries: number }> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      await client.query("BEGIN");
      const result = await client.query(
        "SELECT chunked_map.chunked_register($1, $2::jsonb) AS seq",
        [map, JSON.stringify(payload)],
      );
      await client.query("COMMIT");
      return { seq: Number(result.rows[0].seq), retries: attempt };
    } catch (error) {
      await client.query("ROLLBACK");
      if ((error as { code?: string }).code !== "40001") throw error;
      // another transaction is appending to this map: back off and retry
      await sleep(Math.random() * 2 * 2 ** attempt);
    }
  }
  throw new Error(`map ${map} still busy after ${attempts} attempts`);
}

/** Every page of the map, newest first, following next_page_token. */
async function* pages(client: pg.Client, map: string): AsyncGenerator<Page> {
  let token: string | null = "current";
  while (token !== null) {
    const result = await client.query("SELECT chunked_map.chunked_page($1, $2) AS page", [map, token]);
    const page = result.rows[0].page as Page;
    yield page;
    token = page.next_page_token;
  }
}

async function main(): Promise<void> {
  const [map = "subscribers", count = "10", chunkSize = "3"] = process.argv.slice(2);
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query("SELECT chunked_map.chunked_start($1, $2)", [map, Number(chunkSize)]);
    const appended: number[] = [];
    let retries = 0;
    for (let i = 1; i <= Number(count); i++) {
      const result = await register(client, map, { email: `user${i}@example.com`, n: i });
      appended.push(result.seq);
      retries += result.retries;
    }
    const read: Page[] = [];
    for await (const page of pages(client, map)) read.push(page);
    console.log(
      JSON.stringify({
        appended,
        retries,
        pages: read.map((page) => page.page_token),
        records: read.flatMap((page) => page.records),
      }),
    );
  } finally {
    await client.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
