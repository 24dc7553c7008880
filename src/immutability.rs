//! History cannot be rewritten, nor forged, by direct DML. The storage tables carry
//! statement-level `BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE` triggers (sql/protect.sql)
//! that call this function: it lets the tables' owner through (the API functions run as the
//! owner: they are SECURITY DEFINER) and refuses everyone else with 42501, whatever table
//! privileges they were granted. It fires once per statement, the append path's included, so
//! the owner's way through comes first and costs one comparison.

use pgrx::prelude::*;
use pgrx::WhoAllocated;

use crate::error::ChunkedError;

#[pg_trigger]
fn chunked_forbid_rewrite<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, PgTriggerError> {
    let relation = trigger.relation()?;
    // SAFETY: a trigger's relation is open and its pg_class row is loaded.
    let owner = unsafe { (*relation.rd_rel).relowner };
    // Members of the owning role (and superusers) could drop the trigger anyway.
    if unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) } {
        return Ok(None::<PgHeapTuple<'a, AllocatedByPostgres>>);
    }
    let operation = match trigger.op()? {
        PgTriggerOperation::Insert => "INSERT",
        PgTriggerOperation::Update => "UPDATE",
        PgTriggerOperation::Delete => "DELETE",
        PgTriggerOperation::Truncate => "TRUNCATE",
    };
    let table = format!("{}.{}", trigger.table_schema()?, trigger.table_name()?);
    ChunkedError::HistoryIsImmutable { operation, table }.raise()
}
