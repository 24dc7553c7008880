//! Every statement of the extension, for the tests that prepare and check each one: the one
//! place that knows the core's statements (`statements`), Citus's (`citus::statements`) and the
//! message store's (`message_store::statements`, checked here but prepared only where the store
//! is: not in [`all`]), so that no module names another. A statements module is added here.

#![cfg(any(test, feature = "pg_test"))]

use crate::citus;
use crate::statements::{self, feed, ids, reads, retention, state, verify, writes};

/// Every statement (those that name Citus's objects only where Citus is there: `with_citus`).
pub fn all(with_citus: bool) -> Vec<&'static dyn crate::pg::spi::Declared> {
    let mut all = [
        state::ALL,
        writes::ALL,
        reads::ALL,
        retention::ALL,
        feed::ALL,
        ids::ALL,
        verify::ALL,
        citus::statements::probe::ALL,
        statements::ALL,
    ]
    .concat();
    if with_citus {
        all.extend_from_slice(citus::statements::ALL);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (key, SQL) of every statement.
    fn all_sql() -> Vec<(&'static str, &'static str)> {
        [
            state::SQL,
            writes::SQL,
            reads::SQL,
            retention::SQL,
            feed::SQL,
            ids::SQL,
            verify::SQL,
            citus::statements::probe::SQL,
            citus::statements::SQL,
            statements::SQL,
            crate::message_store::statements::SQL,
        ]
        .concat()
    }

    /// The schema every table a statement names is in: the message store's for its own.
    fn schema_of(key: &str) -> &'static str {
        if key.starts_with("chunked_map::message_store::") {
            "message_store."
        } else {
            "chunked_map."
        }
    }

    #[test]
    fn statement_keys_are_unique() {
        let mut keys: Vec<&str> = all_sql().iter().map(|(key, _)| *key).collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len());
    }

    #[test]
    fn every_table_is_schema_qualified() {
        // every relation a statement reads or writes follows one of these words
        const BEFORE_A_RELATION: [&str; 5] = ["FROM", "JOIN", "INTO", "UPDATE", "TABLE"];
        for (key, sql) in all_sql() {
            let ctes: Vec<&str> = sql
                .match_indices(" AS (")
                .filter_map(|(at, _)| {
                    sql[..at]
                        .rsplit(|c: char| c.is_whitespace() || c == ',')
                        .next()
                })
                .collect();
            let words: Vec<&str> = sql
                .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
                .filter(|word| !word.is_empty())
                .collect();
            for (at, pair) in words.windows(2).enumerate() {
                let (keyword, relation) = (pair[0], pair[1]);
                if !BEFORE_A_RELATION.contains(&keyword) {
                    continue;
                }
                // FOR UPDATE, FOR NO KEY UPDATE, ON CONFLICT ... DO UPDATE: a lock or an action,
                // not a relation
                let before = at.checked_sub(1).map(|i| words[i]);
                if keyword == "UPDATE" && matches!(before, Some("FOR" | "KEY" | "DO")) {
                    continue;
                }
                // IS DISTINCT FROM: a comparison
                if keyword == "FROM" && before == Some("DISTINCT") {
                    continue;
                }
                // a common table expression of the statement itself
                if ctes.contains(&relation) {
                    continue;
                }
                // a function in FROM (unnest, jsonb_array_elements, ...) or a subquery
                let is_function = sql.contains(&format!("{relation}("));
                let is_subquery = relation == "LATERAL" || relation == "SELECT";
                if is_function || is_subquery || relation.starts_with("pg_catalog.") {
                    continue;
                }
                assert!(
                    relation.starts_with(schema_of(key)),
                    "{key}: {keyword} {relation} is not qualified"
                );
            }
        }
    }
}
