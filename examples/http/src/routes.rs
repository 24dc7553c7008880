//! The pattern's three endpoints.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use deadpool_postgres::Pool;
use serde_json::json;

use crate::error::ApiError;
use crate::retry::{with_backoff, Budget};

pub const BASE: &str = "/patterns/sequentially-chunked-attribute-map";
/// How many times the service retried the statement behind a response (after 40001).
pub const RETRIES_HEADER: &str = "x-chunked-map-retries";

pub struct AppState {
    pub pool: Pool,
    pub map: String,
    pub budget: Budget,
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(&format!("{BASE}/start"), post(start))
        .route(&format!("{BASE}/register"), post(register))
        .route(&format!("{BASE}/subscribers"), get(subscribers))
        // let payloads reach the extension, whose limit (chunked_map.max_payload_bytes) answers 413
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(state)
}

/// A statement's failure: no connection, or the database said no.
enum Failure {
    Pool(String),
    Db(tokio_postgres::Error),
}

impl Failure {
    fn is_conflict(&self) -> bool {
        matches!(self, Failure::Db(e) if e.code().map(|c| c.code()) == Some("40001"))
    }

    fn into_api_error(self, retries: u32) -> ApiError {
        match self {
            Failure::Pool(message) => ApiError::unavailable(message),
            Failure::Db(error) => ApiError::from_db(&error, retries),
        }
    }
}

/// Runs one single-row statement (its own transaction), retrying it while it meets 40001.
async fn query_one(
    state: &AppState,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<(tokio_postgres::Row, u32), ApiError> {
    let attempts = with_backoff(state.budget, Failure::is_conflict, || async {
        let client = state
            .pool
            .get()
            .await
            .map_err(|e| Failure::Pool(format!("no database connection: {e}")))?;
        let statement = client.prepare_cached(sql).await.map_err(Failure::Db)?;
        client
            .query_one(&statement, params)
            .await
            .map_err(Failure::Db)
    })
    .await;
    match attempts.result {
        Ok(row) => Ok((row, attempts.retries)),
        Err(failure) => Err(failure.into_api_error(attempts.retries)),
    }
}

fn with_retries(mut response: Response, retries: u32) -> Response {
    response
        .headers_mut()
        .insert(RETRIES_HEADER, HeaderValue::from(retries));
    response
}

#[derive(serde::Deserialize)]
struct StartBody {
    chunk_size: Option<i32>,
}

/// `POST .../start`, optional body `{"chunk_size": n}`: 201 when the map was created, 200 when
/// it already existed (and is left as it was).
async fn start(State(state): State<Arc<AppState>>, body: Bytes) -> Result<Response, ApiError> {
    let chunk_size = if body.iter().all(u8::is_ascii_whitespace) {
        100
    } else {
        let parsed: StartBody = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("body must be {{\"chunk_size\": n}}: {e}"))
        })?;
        parsed.chunk_size.unwrap_or(100)
    };
    let (row, retries) = query_one(
        &state,
        "SELECT chunked_map.chunked_start($1, $2)",
        &[&state.map, &chunk_size],
    )
    .await?;
    let created: bool = row.get(0);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = Json(json!({"map": state.map, "created": created}));
    Ok(with_retries((status, body).into_response(), retries))
}

/// `POST .../register` with a JSON body: appends it, answers `{"seq": n}`. The body is parsed by
/// PostgreSQL, so numbers keep their precision. With `?expectedLastSeq=n` it appends only if the
/// map's newest sequence is `n` (0: empty), and answers 409 otherwise (never retried: the same
/// request cannot succeed).
async fn register(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> Result<Response, ApiError> {
    let expected = match query.get("expectedLastSeq") {
        None => None,
        Some(value) => Some(value.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!("expectedLastSeq must be an integer, got {value:?}"))
        })?),
    };
    let map = query.get("map").unwrap_or(&state.map);
    let (row, retries) = match expected {
        None => {
            query_one(
                &state,
                "SELECT chunked_map.chunked_register($1, $2::text::jsonb)",
                &[map, &body],
            )
            .await?
        }
        Some(expected) => {
            query_one(
                &state,
                "SELECT chunked_map.chunked_register($1, $2::text::jsonb, $3)",
                &[map, &body, &expected],
            )
            .await?
        }
    };
    let seq: i64 = row.get(0);
    Ok(with_retries(
        Json(json!({"seq": seq})).into_response(),
        retries,
    ))
}

/// `GET .../subscribers?pageToken=current`: the page JSON exactly as chunked_page returns it.
async fn subscribers(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let token = query
        .get("pageToken")
        .map(String::as_str)
        .unwrap_or("current");
    let (row, retries) = query_one(
        &state,
        "SELECT chunked_map.chunked_page($1, $2)::text",
        &[&state.map, &token],
    )
    .await?;
    let page: String = row.get(0);
    let response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        page,
    );
    Ok(with_retries(response.into_response(), retries))
}
