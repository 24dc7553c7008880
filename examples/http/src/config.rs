//! Settings, from the environment or flags (flags win).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "subscribers-http",
    about = "The sequentially chunked map pattern over HTTP, backed by chunked_map"
)]
pub struct Config {
    /// libpq-style connection string or URL of a database with `CREATE EXTENSION chunked_map`
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: String,

    /// Address to listen on
    #[arg(long, env = "BIND_ADDR", default_value = "127.0.0.1:8080")]
    pub bind_addr: SocketAddr,

    /// The map the endpoints serve
    #[arg(long, env = "CHUNKED_MAP", default_value = "subscribers")]
    pub chunked_map: String,

    /// Attempts at an append that keeps meeting 40001 before answering 503
    #[arg(long, env = "RETRY_MAX_ATTEMPTS", default_value_t = 20)]
    pub retry_max_attempts: u32,

    /// Time budget for those attempts, in milliseconds
    #[arg(long, env = "RETRY_MAX_ELAPSED_MS", default_value_t = 2000)]
    pub retry_max_elapsed_ms: u64,

    /// Connections in the pool
    #[arg(long, env = "POOL_SIZE", default_value_t = 16)]
    pub pool_size: usize,

    /// How long an append waits for the map when another request's transaction holds it
    /// (`chunked_map.lock_timeout` on every pooled connection), in milliseconds. A short wait
    /// serves a hot map better than failing at once and retrying: requests queue on the map's
    /// lock instead of spinning. 0: never wait (chunked_map's default), retry instead.
    #[arg(long, env = "LOCK_TIMEOUT_MS", default_value_t = 50)]
    pub lock_timeout_ms: u32,
}

impl Config {
    pub fn retry_budget(&self) -> crate::retry::Budget {
        crate::retry::Budget {
            max_attempts: self.retry_max_attempts.max(1),
            max_elapsed: Duration::from_millis(self.retry_max_elapsed_ms),
        }
    }
}
