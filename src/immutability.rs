//! History cannot be rewritten, nor forged, by direct DML. The storage tables carry
//! statement-level `BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE` triggers (sql/protect.sql)
//! that call this function: it lets the tables' owner through (the API functions run as the
//! owner: they are SECURITY DEFINER) and refuses everyone else with 42501, whatever table
//! privileges they were granted. It fires once per statement, the append path's included, so
//! the owner's way through comes first and costs one comparison.

use std::ffi::CStr;

use pgrx::pg_sys;

use crate::error::ChunkedError;
use crate::sql_function;

sql_function!(
    pg_finfo_chunked_forbid_rewrite_wrapper,
    chunked_forbid_rewrite_wrapper,
    |call| {
        let trigger = call.trigger_data();
        // SAFETY: PostgreSQL fires the trigger with its TriggerData: the relation is open and
        // its pg_class row loaded for the duration of the call.
        let (relation, event) = unsafe { ((*trigger).tg_relation, (*trigger).tg_event) };
        // SAFETY: as above.
        let owner = unsafe { (*(*relation).rd_rel).relowner };
        // Members of the owning role (and superusers) could drop the trigger anyway.
        // SAFETY: catalog lookups of roles; no error for existing roles.
        if unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) } {
            // a statement-level trigger returns a NULL pointer
            return call.returns_no_row();
        }
        let operation = match event & pg_sys::TRIGGER_EVENT_OPMASK {
            pg_sys::TRIGGER_EVENT_INSERT => "INSERT",
            pg_sys::TRIGGER_EVENT_UPDATE => "UPDATE",
            pg_sys::TRIGGER_EVENT_DELETE => "DELETE",
            _ => "TRUNCATE",
        };
        // SAFETY: the open relation's namespace and name.
        let table = unsafe {
            let schema = pg_sys::get_namespace_name((*(*relation).rd_rel).relnamespace);
            let name = (*(*relation).rd_rel).relname.data.as_ptr();
            format!(
                "{}.{}",
                CStr::from_ptr(schema).to_string_lossy(),
                CStr::from_ptr(name).to_string_lossy()
            )
        };
        ChunkedError::HistoryIsImmutable { operation, table }.raise()
    }
);
