//! The SQL functions are declared twice: in `sql/api.sql` and the message store's script
//! (arguments, result) and in the Rust that reads them (`sql_function!` bodies in `src/api.rs`,
//! `src/immutability.rs` and `src/message_store/api.rs`, through
//! `pg::fmgr::Call`'s typed getters). Nothing at run time checks that the two agree (an
//! argument read as another type is undefined behaviour, not an error), so these tests do: each
//! C symbol's SQL argument types must be the types its body reads at the same positions, every
//! argument must be read, and its result must be what the body returns.

#![cfg(test)]

use std::collections::BTreeMap;

/// The scripts that declare C functions of this library: chunked_map's, and the message store's
/// (whose `MODULE_PATHNAME` is this library too).
const SQL_SOURCES: [&str; 2] = [
    include_str!("../sql/api.sql"),
    include_str!("../sql/message_store/chunked_map_message_store--0.5.0.sql"),
];
const RUST_SOURCES: [&str; 3] = [
    include_str!("api.rs"),
    include_str!("immutability.rs"),
    include_str!("message_store/api.rs"),
];

/// One `CREATE FUNCTION ... LANGUAGE c AS 'MODULE_PATHNAME', '<symbol>'` of sql/api.sql.
#[derive(Debug)]
struct Declared {
    function: String,
    arguments: Vec<String>,
    returns: String,
}

/// What one `sql_function!` body reads and returns.
#[derive(Debug, Default)]
struct Read {
    arguments: BTreeMap<usize, String>,
    returns: Vec<String>,
}

fn declared() -> BTreeMap<String, Declared> {
    let mut by_symbol = BTreeMap::new();
    for statement in SQL_SOURCES.iter().flat_map(|source| source.split(';')) {
        let Some(at) = statement.find("CREATE FUNCTION ") else {
            continue;
        };
        // a function in SQL or PL/pgSQL (whose body this split cuts at its first `;`) reads
        // nothing through `Call`
        if !statement.contains("'MODULE_PATHNAME'") {
            continue;
        }
        let text = &statement[at + "CREATE FUNCTION ".len()..];
        let open = text.find('(').expect("argument list");
        let close = matching_paren(text, open);
        let function = text[..open].trim().to_owned();
        let arguments = split_top_level(&text[open + 1..close])
            .into_iter()
            .filter(|argument| !argument.trim().is_empty())
            // (an OUT parameter is a column of the result, `RETURNS record`)
            .filter(|argument| argument.split_whitespace().next() != Some("OUT"))
            .map(|argument| {
                let words: Vec<&str> = argument.split_whitespace().collect();
                // `name type [DEFAULT ...]`
                words.get(1).expect("argument type").to_string()
            })
            .collect();
        let after = &text[close + 1..];
        let returns_at = after.find("RETURNS ").expect("RETURNS") + "RETURNS ".len();
        let returns_text = &after[returns_at..];
        let returns = if returns_text.starts_with("TABLE") {
            "TABLE".to_owned()
        } else if let Some(rest) = returns_text.strip_prefix("SETOF ") {
            format!(
                "SETOF {}",
                rest.split_whitespace().next().expect("SETOF type")
            )
        } else {
            returns_text
                .split_whitespace()
                .next()
                .expect("type")
                .to_owned()
        };
        let symbol = after
            .split("'MODULE_PATHNAME', '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("C symbol")
            .to_owned();
        by_symbol.insert(
            symbol,
            Declared {
                function,
                arguments,
                returns,
            },
        );
    }
    by_symbol
}

fn matching_paren(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (at, c) in text.char_indices().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return at;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses in {text}");
}

fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts
}

/// The SQL type each getter of `Call` reads.
fn getter_type(getter: &str) -> Option<&'static str> {
    Some(match getter {
        "text" => "text",
        "varchar" => "varchar",
        "int4" => "integer",
        "int8" => "bigint",
        "boolean" => "boolean",
        "interval" => "interval",
        "timestamptz" => "timestamptz",
        "jsonb" => "jsonb",
        "jsonb_array" => "jsonb[]",
        "text_array" => "text[]",
        _ => return None,
    })
}

/// The SQL result each `returns_*` of `Call` makes.
fn result_type(returns: &str) -> &'static str {
    match returns {
        "returns_bigint" => "bigint",
        "returns_boolean" => "boolean",
        "returns_jsonb" | "returns_json" => "jsonb",
        "returns_void" => "void",
        "returns_rows" | "returns_rows_with_nulls" => "TABLE",
        // one row of OUT parameters
        "returns_row" => "record",
        // `returns_values(pg_sys::INT8OID, ...)` is the only one
        "returns_values" => "SETOF bigint",
        "returns_no_row" => "trigger",
        other => panic!("a result {other} this test does not know"),
    }
}

fn read() -> BTreeMap<String, Read> {
    let mut by_symbol = BTreeMap::new();
    for source in RUST_SOURCES {
        for body in source.split("sql_function!(").skip(1) {
            let mut names = body
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty());
            let finfo = names.next().expect("finfo name");
            let symbol = names.next().expect("symbol").to_owned();
            assert_eq!(finfo, format!("pg_finfo_{symbol}"));
            let mut read = Read::default();
            for use_ in body.split("call.").skip(1) {
                let name: String = use_
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let rest = &use_[name.len()..];
                if let Some(sql_type) = getter_type(&name) {
                    let index: usize = rest
                        .trim_start_matches('(')
                        .split(')')
                        .next()
                        .and_then(|index| index.parse().ok())
                        .unwrap_or_else(|| panic!("{symbol}: call.{name} with a literal index"));
                    if let Some(earlier) = read.arguments.insert(index, sql_type.to_owned()) {
                        assert_eq!(
                            earlier, sql_type,
                            "{symbol}: argument {index} read as two types"
                        );
                    }
                } else if name.starts_with("returns_") {
                    read.returns.push(result_type(&name).to_owned());
                } else if name == "trigger_data" {
                    read.returns.push("trigger".to_owned());
                }
            }
            by_symbol.insert(symbol, read);
        }
    }
    by_symbol
}

#[test]
fn every_c_symbol_of_the_sql_functions_has_a_rust_body_and_the_other_way_round() {
    let declared: Vec<String> = declared().into_keys().collect();
    let read: Vec<String> = read().into_keys().collect();
    assert_eq!(declared, read);
}

/// Where the SQL declarations and the bodies disagree, one line each.
fn disagreements(
    declared: &BTreeMap<String, Declared>,
    read: &BTreeMap<String, Read>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (symbol, declared) in declared {
        let Some(body) = read.get(symbol) else {
            found.push(format!("{symbol}: no body"));
            continue;
        };
        let reads: Vec<String> = (0..declared.arguments.len())
            .map(|index| {
                body.arguments
                    .get(&index)
                    .cloned()
                    .unwrap_or_else(|| "(not read)".to_owned())
            })
            .collect();
        if reads != declared.arguments {
            found.push(format!(
                "{} ({symbol}): declared {:?}, read {:?}",
                declared.function, declared.arguments, reads
            ));
        }
        if body
            .arguments
            .keys()
            .any(|index| *index >= declared.arguments.len())
        {
            found.push(format!(
                "{} ({symbol}) reads an argument it does not declare: {:?}",
                declared.function, body.arguments
            ));
        }
        if body.returns.is_empty() || body.returns.iter().any(|r| *r != declared.returns) {
            found.push(format!(
                "{} ({symbol}) returns {} but its body makes {:?}",
                declared.function, declared.returns, body.returns
            ));
        }
    }
    found
}

#[test]
fn each_body_reads_its_arguments_as_the_sql_declares_them_and_returns_its_result_type() {
    assert_eq!(disagreements(&declared(), &read()), Vec::<String>::new());
}

/// An argument type or a result changed in sql/api.sql alone is found.
#[test]
fn a_type_changed_on_one_side_is_found() {
    let read = read();
    let mut declared = declared();
    declared
        .get_mut("chunked_register_if_last_wrapper")
        .expect("declared")
        .arguments[2] = "integer".to_owned();
    declared
        .get_mut("chunked_info_wrapper")
        .expect("declared")
        .returns = "json".to_owned();
    let found = disagreements(&declared, &read);
    assert_eq!(found.len(), 2, "{found:?}");
}
