//! subscribers-http: the sequentially chunked map pattern's HTTP controller (pattern.md), with
//! chunked_map in PostgreSQL as the store.
//!
//! - `POST /patterns/sequentially-chunked-attribute-map/start`: start the map (201 / 200)
//! - `POST /patterns/sequentially-chunked-attribute-map/register`: append the JSON body
//!   (`?expectedLastSeq=n`: only after that newest sequence; `?map=name`: another map than the
//!   configured one)
//! - `GET /patterns/sequentially-chunked-attribute-map/subscribers?pageToken=current`: a page

mod config;
mod error;
mod retry;
mod routes;

use std::sync::Arc;

use clap::Parser;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

use config::Config;
use routes::AppState;

#[tokio::main]
async fn main() {
    let config = Config::parse();
    if let Err(message) = run(config).await {
        eprintln!("subscribers-http: {message}");
        std::process::exit(1);
    }
}

async fn run(config: Config) -> Result<(), String> {
    let mut pg_config: tokio_postgres::Config = config
        .database_url
        .parse()
        .map_err(|e| format!("DATABASE_URL: {e}"))?;
    // every pooled connection waits up to the configured time for a held map
    let options = format!(
        "{} -c chunked_map.lock_timeout={}ms",
        pg_config.get_options().unwrap_or(""),
        config.lock_timeout_ms
    );
    pg_config.options(options.trim());
    let manager = Manager::from_config(
        pg_config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(config.pool_size)
        .build()
        .map_err(|e| e.to_string())?;
    let state = Arc::new(AppState {
        pool,
        map: config.chunked_map.clone(),
        budget: config.retry_budget(),
    });

    let listener = tokio::net::TcpListener::bind(config.bind_addr)
        .await
        .map_err(|e| format!("bind {}: {e}", config.bind_addr))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!(
        "subscribers-http: serving map \"{}\" on http://{address}{}",
        config.chunked_map,
        routes::BASE
    );
    axum::serve(listener, routes::router(state))
        .with_graceful_shutdown(shutdown())
        .await
        .map_err(|e| e.to_string())
}

async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
