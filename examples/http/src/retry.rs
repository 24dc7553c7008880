//! Retrying what chunked_map reports as a conflict (SQLSTATE 40001): bounded attempts and time,
//! full-jitter exponential backoff.

use std::future::Future;
use std::time::{Duration, Instant};

use rand::Rng;

#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_attempts: u32,
    pub max_elapsed: Duration,
}

const BASE: Duration = Duration::from_millis(2);
const CAP: Duration = Duration::from_millis(100);

/// What came of the attempts: the last result and how many retries were made.
pub struct Attempts<T, E> {
    pub result: Result<T, E>,
    pub retries: u32,
}

/// Runs `attempt` until it succeeds, fails with something `retryable` does not accept, or the
/// budget runs out.
pub async fn with_backoff<T, E, F, Fut>(
    budget: Budget,
    retryable: impl Fn(&E) -> bool,
    mut attempt: F,
) -> Attempts<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let began = Instant::now();
    let mut retries = 0;
    loop {
        let result = attempt().await;
        let give_up = match &result {
            Ok(_) => true,
            Err(error) => !retryable(error) || retries + 1 >= budget.max_attempts,
        };
        if give_up {
            return Attempts { result, retries };
        }
        let ceiling = BASE.saturating_mul(1 << retries.min(16)).min(CAP);
        let pause = rand::rng().random_range(Duration::ZERO..=ceiling);
        if began.elapsed() + pause >= budget.max_elapsed {
            return Attempts { result, retries };
        }
        tokio::time::sleep(pause).await;
        retries += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stops_after_max_attempts() {
        let budget = Budget {
            max_attempts: 4,
            max_elapsed: Duration::from_secs(10),
        };
        let mut calls = 0;
        let out: Attempts<(), &str> = with_backoff(
            budget,
            |_| true,
            || {
                calls += 1;
                async { Err("busy") }
            },
        )
        .await;
        assert_eq!(calls, 4);
        assert_eq!(out.retries, 3);
        assert!(out.result.is_err());
    }

    #[tokio::test]
    async fn does_not_retry_what_is_not_retryable() {
        let budget = Budget {
            max_attempts: 10,
            max_elapsed: Duration::from_secs(10),
        };
        let mut calls = 0;
        let out: Attempts<(), &str> = with_backoff(
            budget,
            |_| false,
            || {
                calls += 1;
                async { Err("bad input") }
            },
        )
        .await;
        assert_eq!((calls, out.retries), (1, 0));
    }

    #[tokio::test]
    async fn stops_when_the_time_budget_is_spent() {
        let budget = Budget {
            max_attempts: 1000,
            max_elapsed: Duration::from_millis(50),
        };
        let began = Instant::now();
        let out: Attempts<(), &str> =
            with_backoff(budget, |_| true, || async { Err("busy") }).await;
        assert!(began.elapsed() < Duration::from_millis(200));
        assert!(out.retries > 0);
    }
}
