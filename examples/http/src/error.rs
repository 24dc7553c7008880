//! How database errors become HTTP answers: the SQLSTATE decides the status; the body is JSON
//! with the SQLSTATE and the message.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub sqlstate: Option<String>,
    pub message: String,
    /// Retries the service made before answering.
    pub retries: u32,
}

impl ApiError {
    pub fn from_db(error: &tokio_postgres::Error, retries: u32) -> ApiError {
        match error.as_db_error() {
            Some(db) => {
                let sqlstate = db.code().code();
                ApiError {
                    status: status_for(sqlstate),
                    sqlstate: Some(sqlstate.to_string()),
                    message: db.message().to_string(),
                    retries,
                }
            }
            None => ApiError::unavailable(format!("database unavailable: {error}")),
        }
    }

    pub fn unavailable(message: String) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            sqlstate: None,
            message,
            retries: 0,
        }
    }

    pub fn bad_request(message: String) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            sqlstate: None,
            message,
            retries: 0,
        }
    }
}

/// SQLSTATE -> HTTP status.
pub fn status_for(sqlstate: &str) -> StatusCode {
    match sqlstate {
        // malformed token, bad map name or chunk size, NULL, JSON that does not parse
        "22023" | "22004" | "22P02" => StatusCode::BAD_REQUEST,
        // unknown map or token
        "42704" => StatusCode::NOT_FOUND,
        // payload over chunked_map.max_payload_bytes
        "54000" => StatusCode::PAYLOAD_TOO_LARGE,
        // an optimistic append whose expected newest sequence is not the map's: retrying the
        // same request cannot succeed
        "23000" => StatusCode::CONFLICT,
        // still conflicting after the service's own retries
        "40001" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"sqlstate": self.sqlstate, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        headers.insert(
            crate::routes::RETRIES_HEADER,
            HeaderValue::from(self.retries),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_map_to_statuses() {
        assert_eq!(status_for("22023"), StatusCode::BAD_REQUEST);
        assert_eq!(status_for("42704"), StatusCode::NOT_FOUND);
        assert_eq!(status_for("54000"), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status_for("40001"), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status_for("23000"), StatusCode::CONFLICT);
        assert_eq!(status_for("XX000"), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
