//! Keeps a NULL map away from Citus's function delegation.
//!
//! On a Citus cluster, `SELECT chunked_map.chunked_info($1)` is delegated to the node that holds
//! the map: after PostgreSQL's standard planner has simplified the query in place (named
//! arguments placed, constants folded, bound parameters substituted, SQL functions inlined),
//! Citus's planner looks at it and hashes the map argument to find the node. Citus 13.2 hashes a
//! NULL there as if it were a value, and the backend dies with a segmentation fault (which
//! restarts every session of the node).
//!
//! Where Citus is loaded first and chunked_map after it (`shared_preload_libraries =
//! 'citus,chunked_map'`), this guard hooks the standard planner's last step
//! (`create_upper_paths_hook`, final stage, top query level): it sees the query exactly as
//! Citus will, simplified once by PostgreSQL, evaluates nothing and copies nothing, and raises
//! 22004 when the query has the one shape Citus delegates (a SELECT without WHERE whose only
//! target, or only FROM item, is a call of one of the extension's functions, outside a
//! transaction block) with a NULL map. Everything else goes on to the next hook untouched; an
//! error PostgreSQL or another hook raises passes through as it was raised.
//!
//! Where Citus is not loaded, the guard is not installed: preloading chunked_map on a plain
//! PostgreSQL changes nothing in planning (`chunked_map.null_map_guard_everywhere = on`
//! installs it there too, to test it without Citus). Each node that has the guard defines the setting
//! `chunked_map.null_map_guard` (on), which `chunked_distribute` checks on every node.

use std::sync::OnceLock;

use pgrx::pg_sys;
use pgrx::PgList;

use crate::error::ChunkedError;
use crate::guc;
use crate::pg::boundary::enter;

/// The hook that was installed before ours (another extension's), called after ours.
static PREVIOUS: OnceLock<pg_sys::create_upper_paths_hook_type> = OnceLock::new();

/// Installs the guard when the library is being preloaded after Citus (or everywhere, when
/// `chunked_map.null_map_guard_everywhere` says so); called from `_PG_init`.
pub fn install() {
    // SAFETY: reading PostgreSQL's flag for "shared_preload_libraries is being loaded".
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    guc::define_null_map_guard_everywhere();
    if !super::is_loaded() && !guc::null_map_guard_everywhere() {
        return;
    }
    // SAFETY: _PG_init runs once per process, before any query is planned; the hook pointer is
    // PostgreSQL's global, chained as every extension chains it.
    unsafe {
        if PREVIOUS.set(pg_sys::create_upper_paths_hook).is_err() {
            return;
        }
        pg_sys::create_upper_paths_hook = Some(final_stage_of_planning);
    }
    // what other nodes' chunked_distribute reads (through run_command_on_workers)
    guc::define_null_map_guard();
}

/// Whether this process plans through the guard.
pub fn installed() -> bool {
    PREVIOUS.get().is_some()
}

unsafe extern "C-unwind" fn final_stage_of_planning(
    root: *mut pg_sys::PlannerInfo,
    stage: pg_sys::UpperRelationKind::Type,
    input_rel: *mut pg_sys::RelOptInfo,
    output_rel: *mut pg_sys::RelOptInfo,
    extra: *mut std::ffi::c_void,
) {
    if stage == pg_sys::UpperRelationKind::UPPERREL_FINAL {
        // SAFETY: the planner's own PlannerInfo, read as the planner left it; this frame holds
        // only the hook's arguments when an error is raised through it.
        unsafe {
            enter(|| {
                if citus_would_delegate_with_a_null_map(root) {
                    ChunkedError::NullArgument { argument: "map" }.raise();
                }
            })
        };
    }
    if let Some(previous) = PREVIOUS.get().copied().flatten() {
        // SAFETY: the hook that was installed before ours, with the arguments we were given; an
        // error it raises passes through this frame, which has nothing to drop.
        unsafe { previous(root, stage, input_rel, output_rel, extra) };
    }
}

/// Whether Citus's delegation will look at this query as a call of one of the extension's
/// functions whose map is NULL (the checks of Citus's `TryToDelegateFunctionCall`, in its
/// order, up to the hash of the map).
///
/// # Safety
/// `root` is the planner's, at the final stage of planning.
unsafe fn citus_would_delegate_with_a_null_map(root: *mut pg_sys::PlannerInfo) -> bool {
    // SAFETY: every pointer below comes from the query tree PostgreSQL is planning.
    unsafe {
        if root.is_null() || !(*root).parent_root.is_null() || (*root).query_level != 1 {
            return false;
        }
        let query = (*root).parse;
        if query.is_null()
            || (*query).commandType != pg_sys::CmdType::CMD_SELECT
            || (*query).jointree.is_null()
            || !(*(*query).jointree).quals.is_null()
            || pg_sys::IsTransactionBlock()
        {
            return false;
        }
        let from_call = match from_clause_call(query) {
            FromClause::Empty => None,
            FromClause::Call(call) => Some(call),
            FromClause::Other => return false,
        };
        let targets = PgList::<pg_sys::TargetEntry>::from_pg((*query).targetList);
        let target_call = match targets.len() {
            1 => targets
                .get_ptr(0)
                .map(|entry| (*entry).expr.cast::<pg_sys::Node>())
                .filter(|expr| is_a(*expr, pg_sys::NodeTag::T_FuncExpr)),
            _ => None,
        };
        let call = match (target_call, from_call) {
            (Some(call), None) | (None, Some(call)) => call.cast::<pg_sys::FuncExpr>(),
            _ => return false,
        };
        let args = PgList::<pg_sys::Node>::from_pg((*call).args);
        let null_map = args.get_ptr(0).is_some_and(|map| {
            is_a(map, pg_sys::NodeTag::T_Const) && (*map.cast::<pg_sys::Const>()).constisnull
        });
        // the catalog is looked at for a NULL first argument only
        null_map
            && !pg_sys::contain_volatile_functions((*call).args.cast())
            && is_ours((*call).funcid)
            && is_distributed_by_its_map((*call).funcid)
    }
}

/// Whether `chunked_distribute` distributes the function by its first argument, the map (see
/// `map_functions::MAP_FUNCTIONS`): Citus delegates those only. Others take NULL there on purpose
/// (`chunked_apply_retention(NULL)`: every map) or another first argument, and are not looked at.
fn is_distributed_by_its_map(function: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup by oid, which returns NULL (not an error) for a missing function;
    // the name is a palloc'd NUL-terminated copy, read here only.
    let name = unsafe { pg_sys::get_func_name(function) };
    if name.is_null() {
        return false;
    }
    // SAFETY: as above.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    super::map_functions::MAP_FUNCTIONS.iter().any(|signature| {
        signature
            .strip_prefix("chunked_map.")
            .and_then(|rest| rest.split('(').next())
            .is_some_and(|distributed| distributed.as_bytes() == name.to_bytes())
    })
}

enum FromClause {
    /// No FROM item (after planning: one RTE_RESULT).
    Empty,
    Call(*mut pg_sys::Node),
    Other,
}

/// The query's FROM clause as Citus's delegation reads it.
///
/// # Safety
/// `query` is a query being planned.
unsafe fn from_clause_call(query: *mut pg_sys::Query) -> FromClause {
    // SAFETY: lists and nodes of the query tree.
    unsafe {
        let from = PgList::<pg_sys::Node>::from_pg((*(*query).jointree).fromlist);
        match from.len() {
            0 => return FromClause::Empty,
            1 => {}
            _ => return FromClause::Other,
        }
        let Some(reference) = from.get_ptr(0) else {
            return FromClause::Other;
        };
        if !is_a(reference, pg_sys::NodeTag::T_RangeTblRef) {
            return FromClause::Other;
        }
        let index = (*reference.cast::<pg_sys::RangeTblRef>()).rtindex;
        let table = PgList::<pg_sys::RangeTblEntry>::from_pg((*query).rtable);
        let Some(entry) = usize::try_from(index - 1)
            .ok()
            .and_then(|i| table.get_ptr(i))
        else {
            return FromClause::Other;
        };
        match (*entry).rtekind {
            pg_sys::RTEKind::RTE_RESULT => FromClause::Empty,
            pg_sys::RTEKind::RTE_FUNCTION => {
                let functions = PgList::<pg_sys::RangeTblFunction>::from_pg((*entry).functions);
                match (functions.len(), functions.get_ptr(0)) {
                    (1, Some(function))
                        if is_a((*function).funcexpr, pg_sys::NodeTag::T_FuncExpr) =>
                    {
                        FromClause::Call((*function).funcexpr)
                    }
                    _ => FromClause::Other,
                }
            }
            _ => FromClause::Other,
        }
    }
}

/// # Safety
/// `node` NULL or a valid node.
unsafe fn is_a(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    // SAFETY: every node starts with its tag.
    !node.is_null() && unsafe { (*node).type_ } == tag
}

/// Whether the function belongs to the extension (a member of it, as `pg_depend` records: a
/// role's own function in a schema of the same name is not).
fn is_ours(function: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups by name (missing is fine) and by oid.
    unsafe {
        let extension = pg_sys::get_extension_oid(c"chunked_map".as_ptr(), true);
        extension != pg_sys::InvalidOid
            && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, function) == extension
    }
}
