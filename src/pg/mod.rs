//! The PostgreSQL C interface as the rest of the extension uses it: where errors cross
//! ([`boundary`]), the calling convention of SQL functions ([`fmgr`]), and the few functions
//! called without pgrx's guard ([`raw`]).

pub mod boundary;
pub mod fmgr;
pub mod raw;
