//! Keeps a NULL map away from Citus's function delegation.
//!
//! On a Citus cluster, a call such as `SELECT chunked_map.chunked_info($1)` is delegated to the
//! node that holds the map: Citus's planner hashes the map argument to find it. Citus 13.2 hashes
//! a NULL there as if it were a value, and the backend dies with a segmentation fault (which
//! restarts every session of the node). SPEC.md asks for 22004 instead. This planner hook,
//! installed ahead of Citus's when chunked_map is in `shared_preload_libraries` after `citus`,
//! raises that error first for the query shapes Citus delegates: a single call of one of the
//! extension's functions in the target list, or in `FROM`, whose first argument is a NULL
//! constant or a NULL bound parameter. Everything else goes on to the next planner unchanged.
//! `chunked_distribute` refuses to distribute the functions unless the hook is there on every
//! node.

use std::ffi::{c_char, c_int, c_void};

use pgrx::pg_sys;

use crate::error::ChunkedError;

static mut NEXT_PLANNER: pg_sys::planner_hook_type = None;
static mut INSTALLED: bool = false;

/// Installs the hook when the library is being preloaded (the only time hooks can be chained
/// in a known order); called from `_PG_init`.
pub fn install() {
    // SAFETY: _PG_init runs once per process, before any query is planned.
    unsafe {
        if !pg_sys::process_shared_preload_libraries_in_progress {
            return;
        }
        NEXT_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
        INSTALLED = true;
    }
}

/// Whether this process plans through the hook.
pub fn installed() -> bool {
    // SAFETY: written once, by `install`, before any call can read it.
    unsafe { INSTALLED }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own arguments, read as the planner reads them.
    unsafe {
        if calls_with_null_map(parse, bound_params) {
            ChunkedError::NullArgument { argument: "map" }.raise();
        }
        match NEXT_PLANNER {
            Some(next) => next(parse, query_string, cursor_options, bound_params),
            None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

/// Whether the query is a SELECT whose target list or `FROM` calls one of the extension's
/// functions with a NULL first argument.
///
/// # Safety
/// `parse` is a valid Query; `bound_params` NULL or valid.
unsafe fn calls_with_null_map(
    parse: *mut pg_sys::Query,
    bound_params: pg_sys::ParamListInfo,
) -> bool {
    unsafe {
        if parse.is_null() || (*parse).commandType != pg_sys::CmdType::CMD_SELECT {
            return false;
        }
        let in_targets = items((*parse).targetList).any(|entry| {
            let entry = entry.cast::<pg_sys::TargetEntry>();
            is_call_with_null_map((*entry).expr.cast(), bound_params)
        });
        in_targets
            || items((*parse).rtable).any(|rte| {
                let rte = rte.cast::<pg_sys::RangeTblEntry>();
                (*rte).rtekind == pg_sys::RTEKind::RTE_FUNCTION
                    && items((*rte).functions).any(|function| {
                        let function = function.cast::<pg_sys::RangeTblFunction>();
                        is_call_with_null_map((*function).funcexpr, bound_params)
                    })
            })
    }
}

/// # Safety
/// `node` NULL or a valid node; `bound_params` NULL or valid.
unsafe fn is_call_with_null_map(node: *mut pg_sys::Node, bound_params: pg_sys::ParamListInfo) -> bool {
    unsafe {
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_FuncExpr {
            return false;
        }
        let call = node.cast::<pg_sys::FuncExpr>();
        let Some(first) = items((*call).args).next() else {
            return false;
        };
        is_null(pg_sys::strip_implicit_coercions(first.cast()), bound_params)
            && is_ours((*call).funcid)
    }
}

/// A NULL constant, or a bound parameter whose value is NULL.
///
/// # Safety
/// `node` NULL or a valid node; `bound_params` NULL or valid.
unsafe fn is_null(node: *mut pg_sys::Node, bound_params: pg_sys::ParamListInfo) -> bool {
    unsafe {
        if node.is_null() {
            return false;
        }
        match (*node).type_ {
            pg_sys::NodeTag::T_Const => (*node.cast::<pg_sys::Const>()).constisnull,
            pg_sys::NodeTag::T_Param => {
                let param = node.cast::<pg_sys::Param>();
                (*param).paramkind == pg_sys::ParamKind::PARAM_EXTERN
                    && bound_param_is_null(bound_params, (*param).paramid)
            }
            _ => false,
        }
    }
}

/// # Safety
/// `bound_params` NULL or valid.
unsafe fn bound_param_is_null(bound_params: pg_sys::ParamListInfo, id: c_int) -> bool {
    unsafe {
        if bound_params.is_null() || id < 1 || id > (*bound_params).numParams {
            return false;
        }
        let mut workspace = pg_sys::ParamExternData::default();
        let value = match (*bound_params).paramFetch {
            // speculative, as the planner asks: no error for a value not known yet
            Some(fetch) => fetch(bound_params, id, true, &mut workspace),
            None => (*bound_params)
                .params
                .as_mut_ptr()
                .add(usize::try_from(id - 1).unwrap_or(0)),
        };
        !value.is_null() && (*value).ptype != pg_sys::InvalidOid && (*value).isnull
    }
}

/// Whether the function belongs to the extension's schema.
fn is_ours(function: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups by oid and by name.
    unsafe {
        let schema = pg_sys::get_namespace_oid(c"chunked_map".as_ptr(), true);
        schema != pg_sys::InvalidOid && pg_sys::get_func_namespace(function) == schema
    }
}

/// The elements of a PostgreSQL `List` of pointers (none for NIL).
///
/// # Safety
/// `list` NULL or a valid pointer list that outlives the iterator.
unsafe fn items(list: *mut pg_sys::List) -> impl Iterator<Item = *mut c_void> {
    let length = if list.is_null() {
        0
    } else {
        // SAFETY: a valid list.
        usize::try_from(unsafe { (*list).length }).unwrap_or(0)
    };
    // SAFETY: `length` cells from `elements`.
    (0..length).map(move |i| unsafe { (*(*list).elements.add(i)).ptr_value })
}
