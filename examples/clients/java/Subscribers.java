// chunked_map from Java (JDBC, pgjdbc): start a map, append with a retry loop on 40001, and
// page from 'current' back to the oldest chunk.
//
//   DATABASE_URL=postgresql://user@host:port/db \
//       java -cp /usr/share/java/postgresql.jar Subscribers.java [MAP] [COUNT] [CHUNK_SIZE]
//
// Runs with Debian's default-jdk-headless (17) and libpostgresql-jdbc-java: a single-file
// program, no build. pgjdbc connects over TCP. Prints one JSON object: the sequences appended,
// the retries it took, and every record read. (JSON is handed to and taken from PostgreSQL as
// text: the JDK has no JSON parser, and the pages are printed as the server wrote them.)

import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

public class Subscribers {
    /** Appends one record in its own transaction, retrying on 40001 with jittered backoff. */
    static long[] register(Connection conn, String map, String payload) throws Exception {
        for (int attempt = 0; attempt < 12; attempt++) {
            try (PreparedStatement append = conn.prepareStatement(
                    "SELECT chunked_map.chunked_register(?, ?::jsonb)")) {
                append.setString(1, map);
                append.setString(2, payload);
                try (ResultSet rs = append.executeQuery()) {
                    rs.next();
                    long seq = rs.getLong(1);
                    conn.commit();
                    return new long[] {seq, attempt};
                }
            } catch (SQLException e) {
                conn.rollback();
                if (!"40001".equals(e.getSQLState())) throw e;
                // another transaction is appending to this map: back off and retry
                Thread.sleep((long) (ThreadLocalRandom.current().nextDouble() * 2 * (1L << attempt)));
            }
        }
        throw new IllegalStateException("map " + map + " still busy");
    }

    public static void main(String[] args) throws Exception {
        String map = args.length > 0 ? args[0] : "subscribers";
        int count = args.length > 1 ? Integer.parseInt(args[1]) : 10;
        int chunkSize = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        URI url = URI.create(System.getenv("DATABASE_URL"));
        String user = url.getUserInfo();
        String jdbc = "jdbc:postgresql://" + url.getHost() + ":" + url.getPort() + url.getPath();
        try (Connection conn = DriverManager.getConnection(jdbc, user, "")) {
            try (PreparedStatement start = conn.prepareStatement("SELECT chunked_map.chunked_start(?, ?)")) {
                start.setString(1, map);
                start.setInt(2, chunkSize);
                start.execute();
            }
            conn.setAutoCommit(false);
            List<Long> appended = new ArrayList<>();
            long retries = 0;
            for (int i = 1; i <= count; i++) {
                String payload = "{\"email\": \"user" + i + "@example.com\", \"n\": " + i + "}";
                long[] result = register(conn, map, payload);
                appended.add(result[0]);
                retries += result[1];
            }
            // every page, newest first, following next_page_token: tokens and records as JSON text
            List<String> tokens = new ArrayList<>();
            List<String> records = new ArrayList<>();
            String token = "current";
            try (PreparedStatement page = conn.prepareStatement(
                    "SELECT p ->> 'page_token', p ->> 'next_page_token', "
                    + "(SELECT string_agg(r::text, ',' ORDER BY i) FROM jsonb_array_elements(p -> 'records') WITH ORDINALITY AS e(r, i)) "
                    + "FROM chunked_map.chunked_page(?, ?) AS p")) {
                while (token != null) {
                    page.setString(1, map);
                    page.setString(2, token);
                    try (ResultSet rs = page.executeQuery()) {
                        rs.next();
                        tokens.add("\"" + rs.getString(1) + "\"");
                        if (rs.getString(3) != null) records.add(rs.getString(3));
                        token = rs.getString(2);
                    }
                }
            }
            conn.commit();
            System.out.println("{\"appended\": " + appended + ", \"retries\": " + retries
                    + ", \"pages\": " + tokens + ", \"records\": [" + String.join(",", records) + "]}");
        }
    }
}
