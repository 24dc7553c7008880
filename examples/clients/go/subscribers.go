// chunked_map from Go (pgx v4): start a map, append with a retry loop on 40001, and page from
// 'current' back to the oldest chunk.
//
//	DATABASE_URL=postgres://... go run subscribers.go [MAP] [COUNT] [CHUNK_SIZE]
//
// Built with Debian's golang-go and golang-github-jackc-pgx-v4-dev, in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o subscribers subscribers.go
//
// Prints one JSON object: the sequences appended, the retries it took, and every record read.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

type record struct {
	Seq     int64           `json:"seq"`
	Payload json.RawMessage `json:"payload"`
}

type page struct {
	Map           string   `json:"map"`
	PageToken     string   `json:"page_token"`
	Records       []record `json:"records"`
	NextPageToken *string  `json:"next_page_token"`
}

// isConflict tells whether err is 40001: another transaction holds the map, retry.
func isConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}

// register appends one record in its own transaction, retrying on 40001 with jittered
// backoff; returns the sequence number and the retries it took.
func register(ctx context.Context, conn *pgx.Conn, mapName string, payload any) (int64, int, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, 0, err
	}
	for attempt := 0; attempt < 12; attempt++ {
		seq, err := appendOnce(ctx, conn, mapName, string(body))
		if err == nil {
			return seq, attempt, nil
		}
		if !isConflict(err) {
			return 0, attempt, err
		}
		// another transaction is appending to this map: back off and retry
		time.Sleep(time.Duration(rand.Float64() * 2 * float64(int(1)<<attempt) * float64(time.Millisecond)))
	}
	return 0, 12, fmt.Errorf("map %q still busy: %w", mapName, err)
}

// appendOnce appends in a transaction of its own: committed, or rolled back on any error.
func appendOnce(ctx context.Context, conn *pgx.Conn, mapName, body string) (int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	var seq int64
	if err := tx.QueryRow(ctx, "SELECT chunked_map.chunked_register($1, $2::jsonb)",
		mapName, body).Scan(&seq); err != nil {
		return 0, err
	}
	return seq, tx.Commit(ctx)
}

// pages returns every page of the map, newest first, following next_page_token.
func pages(ctx context.Context, conn *pgx.Conn, mapName string) ([]page, error) {
	var out []page
	token := "current"
	for {
		var text string
		if err := conn.QueryRow(ctx, "SELECT chunked_map.chunked_page($1, $2)::text",
			mapName, token).Scan(&text); err != nil {
			return nil, err
		}
		var p page
		if err := json.Unmarshal([]byte(text), &p); err != nil {
			return nil, err
		}
		out = append(out, p)
		if p.NextPageToken == nil {
			return out, nil
		}
		token = *p.NextPageToken
	}
}

func arg(i int, fallback string) string {
	if len(os.Args) > i {
		return os.Args[i]
	}
	return fallback
}

func main() {
	mapName := arg(1, "subscribers")
	count, _ := strconv.Atoi(arg(2, "10"))
	chunkSize, _ := strconv.Atoi(arg(3, "3"))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT chunked_map.chunked_start($1, $2)", mapName, chunkSize); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	appended, retries := []int64{}, 0
	for i := 1; i <= count; i++ {
		payload := map[string]any{"email": fmt.Sprintf("user%d@example.com", i), "n": i}
		seq, tries, err := register(ctx, conn, mapName, payload)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		appended = append(appended, seq)
		retries += tries
	}
	read, err := pages(ctx, conn, mapName)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tokens, records := []string{}, []record{}
	for _, p := range read {
		tokens = append(tokens, p.PageToken)
		records = append(records, p.Records...)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"appended": appended, "retries": retries, "pages": tokens, "records": records,
	})
}
