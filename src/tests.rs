//! Single-session behaviour, run inside PostgreSQL by `cargo pgrx test`.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn start_returns_true_then_false() {
        assert_eq!(Spi::get_one::<bool>("SELECT chunked_map.chunked_start('m')"), Ok(Some(true)));
        assert_eq!(Spi::get_one::<bool>("SELECT chunked_map.chunked_start('m')"), Ok(Some(false)));
    }
}
