//! The PostgreSQL C interface as the rest of the extension uses it: where errors cross
//! ([`boundary`]), the calling convention of SQL functions ([`fmgr`]), typed statements over
//! SPI ([`spi`]), rows written through the access methods ([`heap`], and with every index entry, [`insert`]), and the few functions called without pgrx's guard ([`raw`]). Nothing here
//! knows the extension's own errors or tables.

pub mod boundary;
pub mod fmgr;
pub mod heap;
pub mod insert;
pub mod raw;
pub mod spi;
