//! Keeps a NULL map away from Citus's function delegation.
//!
//! On a Citus cluster, a call such as `SELECT chunked_map.chunked_info($1)` is delegated to the
//! node that holds the map: once PostgreSQL's planner has simplified the query (named arguments
//! placed, constants folded, bound parameters substituted, small SQL functions inlined), Citus
//! hashes the map argument to find the node. Citus 13.2 hashes a NULL there as if it were a
//! value, and the backend dies with a segmentation fault (which restarts every session of the
//! node). SPEC.md asks for 22004 instead. This planner hook, installed ahead of Citus's when
//! chunked_map is in `shared_preload_libraries` (Citus must be loaded first), looks at the
//! query the way Citus will, on a simplified copy of the parts Citus looks at: a SELECT without
//! WHERE whose only target is a function call, or whose only FROM item is one; when that call
//! is one of the extension's functions with a NULL first argument, it raises 22004 first.
//! Everything else goes on to the next planner unchanged. `chunked_distribute` refuses to
//! distribute the functions unless every node has the hook (setting
//! `chunked_map.null_map_guard`, defined only where it is installed).

use std::ffi::{c_char, c_int, c_void};

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

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
    // what other nodes' chunked_distribute reads (through run_command_on_workers)
    GucRegistry::define_bool_guc(
        c"chunked_map.null_map_guard",
        c"Whether chunked_map's planner hook answers a NULL map before Citus's delegation sees it.",
        c"Defined (and on) only where chunked_map is in shared_preload_libraries.",
        &GUARD_SETTING,
        GucContext::Internal,
        GucFlags::default(),
    );
}

static GUARD_SETTING: GucSetting<bool> = GucSetting::<bool>::new(true);

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

/// Whether Citus would delegate the query as a call of one of the extension's functions with a
/// NULL first argument (see the module's description).
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
        let join_tree = (*parse).jointree;
        if join_tree.is_null() {
            return false;
        }
        let from_call = match from_item(parse, join_tree) {
            FromItem::Nothing => None,
            FromItem::Function(call) => Some(call),
            FromItem::Other => return false,
        };
        let mut targets = items((*parse).targetList);
        let target = match (targets.next(), targets.next()) {
            (Some(entry), None) => Some((*entry.cast::<pg_sys::TargetEntry>()).expr.cast()),
            _ => None,
        };
        // Simplifying evaluates immutable functions: only for calls that may be, or inline to,
        // one of the extension's (every other query pays a look at its top node, no more).
        let candidates = [target, from_call];
        if !candidates
            .iter()
            .flatten()
            .any(|node| may_become_our_call(*node))
        {
            return false;
        }
        let root = planner_root(bound_params);
        if !(*join_tree).quals.is_null() && !is_true(simplified(root, (*join_tree).quals)) {
            return false;
        }
        let target_call = target
            .map(|expr| simplified(root, expr))
            .filter(|node| is_function_call(*node));
        let call = match (target_call, from_call) {
            (Some(call), None) => call,
            (None, Some(call)) => simplified(root, call),
            _ => return false,
        };
        is_call_with_null_map(call, bound_params)
    }
}

enum FromItem {
    Nothing,
    Function(*mut pg_sys::Node),
    Other,
}

/// The query's only FROM item, when it is a function call.
///
/// # Safety
/// `parse` and `join_tree` valid.
unsafe fn from_item(parse: *mut pg_sys::Query, join_tree: *mut pg_sys::FromExpr) -> FromItem {
    unsafe {
        let mut from = items((*join_tree).fromlist);
        let reference = match (from.next(), from.next()) {
            (None, _) => return FromItem::Nothing,
            (Some(reference), None) => reference.cast::<pg_sys::Node>(),
            _ => return FromItem::Other,
        };
        if (*reference).type_ != pg_sys::NodeTag::T_RangeTblRef {
            return FromItem::Other;
        }
        let index = usize::try_from((*reference.cast::<pg_sys::RangeTblRef>()).rtindex - 1);
        let Some(rte) = index.ok().and_then(|i| items((*parse).rtable).nth(i)) else {
            return FromItem::Other;
        };
        let rte = rte.cast::<pg_sys::RangeTblEntry>();
        if (*rte).rtekind != pg_sys::RTEKind::RTE_FUNCTION {
            return FromItem::Other;
        }
        let mut functions = items((*rte).functions);
        match (functions.next(), functions.next()) {
            (Some(function), None) => {
                FromItem::Function((*function.cast::<pg_sys::RangeTblFunction>()).funcexpr)
            }
            _ => FromItem::Other,
        }
    }
}

/// A planner context that knows the bound parameters, for [`simplified`].
///
/// # Safety
/// `bound_params` NULL or valid; the result lives in the current memory context.
unsafe fn planner_root(bound_params: pg_sys::ParamListInfo) -> *mut pg_sys::PlannerInfo {
    unsafe {
        let glob = pg_sys::palloc0(std::mem::size_of::<pg_sys::PlannerGlobal>())
            .cast::<pg_sys::PlannerGlobal>();
        (*glob).type_ = pg_sys::NodeTag::T_PlannerGlobal;
        (*glob).boundParams = bound_params;
        let root = pg_sys::palloc0(std::mem::size_of::<pg_sys::PlannerInfo>())
            .cast::<pg_sys::PlannerInfo>();
        (*root).type_ = pg_sys::NodeTag::T_PlannerInfo;
        (*root).glob = glob;
        root
    }
}

/// A copy of `node` simplified as the planner simplifies expressions: named arguments placed
/// and defaults added, constant subexpressions and bound parameters folded, SQL functions
/// inlined. The query itself is not touched.
///
/// # Safety
/// `root` from [`planner_root`]; `node` valid.
unsafe fn simplified(root: *mut pg_sys::PlannerInfo, node: *mut pg_sys::Node) -> *mut pg_sys::Node {
    unsafe {
        let copy = pg_sys::copyObjectImpl(node.cast()).cast::<pg_sys::Node>();
        pg_sys::eval_const_expressions(root, copy)
    }
}

/// A qualification that simplified to nothing or to `true` (which the planner drops).
///
/// # Safety
/// `node` NULL or valid.
unsafe fn is_true(node: *mut pg_sys::Node) -> bool {
    unsafe {
        if node.is_null() {
            return true;
        }
        if (*node).type_ == pg_sys::NodeTag::T_Const {
            let constant = node.cast::<pg_sys::Const>();
            return !(*constant).constisnull && (*constant).constvalue.value() != 0;
        }
        if (*node).type_ == pg_sys::NodeTag::T_List {
            return items(node.cast()).all(|qual| is_true(qual.cast()));
        }
        false
    }
}

/// A call of one of the extension's functions, or of an SQL function (which the planner may
/// inline into one).
///
/// # Safety
/// `node` NULL or valid.
unsafe fn may_become_our_call(node: *mut pg_sys::Node) -> bool {
    unsafe {
        if !is_function_call(node) {
            return false;
        }
        let function = (*node.cast::<pg_sys::FuncExpr>()).funcid;
        is_ours(function) || is_sql_function(function)
    }
}

/// # Safety
/// `node` NULL or valid.
unsafe fn is_function_call(node: *mut pg_sys::Node) -> bool {
    unsafe { !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_FuncExpr }
}

/// # Safety
/// `node` NULL or a valid node; `bound_params` NULL or valid.
unsafe fn is_call_with_null_map(
    node: *mut pg_sys::Node,
    bound_params: pg_sys::ParamListInfo,
) -> bool {
    unsafe {
        if !is_function_call(node) {
            return false;
        }
        let call = node.cast::<pg_sys::FuncExpr>();
        let Some(first) = items((*call).args).next() else {
            return false;
        };
        let mut first = first.cast::<pg_sys::Node>();
        if (*first).type_ == pg_sys::NodeTag::T_NamedArgExpr {
            first = (*first.cast::<pg_sys::NamedArgExpr>()).arg.cast();
        }
        is_null(pg_sys::strip_implicit_coercions(first), bound_params) && is_ours((*call).funcid)
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

/// PostgreSQL's `sql` language (`pg_language.oid`, fixed at bootstrap).
const SQL_LANGUAGE: pg_sys::Oid = pg_sys::Oid::from_u32(14);

/// Whether the function is written in SQL (the only kind the planner inlines).
fn is_sql_function(function: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by oid, released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            pg_sys::Datum::from(function),
        );
        if tuple.is_null() {
            return false;
        }
        let language = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple)).prolang;
        pg_sys::ReleaseSysCache(tuple);
        language == SQL_LANGUAGE
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
