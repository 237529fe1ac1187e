//! # pagealloc C API
//!
//! `libpagealloc_c.so` / `libpagealloc_c.a` and `include/pagealloc.h` (generated
//! from this crate by cbindgen): the [`pagealloc`] allocator for C callers.
//!
//! Conventions, for every function:
//!
//! - **Errors** are a [`pagealloc_status`] (0 = `PAGEALLOC_OK`); functions that
//!   return something else say how they report errors. On error the calling
//!   thread's last error is set: `pagealloc_last_error_message` gives its text
//!   (the Rust error's message, naming the pfn where there is one). Successful
//!   calls leave the last error alone, as `errno` does.
//! - **Nothing unwinds into C.** Every entry point runs inside
//!   `std::panic::catch_unwind`; a panic comes back as `PAGEALLOC_ERR_PANIC`
//!   with its message. (The library must be built with `panic = "unwind"`, the
//!   default.)
//! - **Pointers.** A null pointer where one is needed is
//!   `PAGEALLOC_ERR_INVALID_ARGUMENT`, never a crash. A handle is checked for
//!   null and a magic number (and alignment, off the order-0 hit paths), so a pointer to something that is not
//!   a handle is refused when it can be read; a handle used after
//!   `pagealloc_destroy` (or a wild pointer) cannot be detected in general and
//!   is undefined behaviour, as in C APIs generally. Array arguments must be
//!   aligned for their element type and point to at least as many elements as
//!   their length says; single out parameters and the config may be at any
//!   address.
//! - **Threads.** Every function except `pagealloc_destroy` may be called from
//!   any number of threads at once on one allocator. `pagealloc_destroy` must
//!   not run concurrently with any other call on the same handle, nor be
//!   followed by one.
//! - **Pfns** are `uint64_t` page frame numbers; `PAGEALLOC_HOLE`
//!   (`UINT64_MAX`) is never a pfn and marks an empty slot in bulk arrays.
#![allow(non_camel_case_types)]

// cbindgen writes each module's items in the order the modules are declared
// here, and include/pagealloc.h is compared with its output: keep this order
// (the blank lines stop rustfmt from sorting the declarations).
mod constants;

mod config;

mod handle;

mod args;

mod alloc;

mod bulk;

mod isolate;

mod page_lock;

mod drain;

mod stats;

mod errors;

mod page_array;

mod status;

mod tcache;

pub use alloc::*;
pub use bulk::*;
pub use config::*;
pub use constants::*;
pub use drain::*;
pub use errors::*;
pub use handle::{pagealloc, pagealloc_create, pagealloc_create_with_holes, pagealloc_destroy, pagealloc_range};
pub use isolate::*;
pub use page_array::*;
pub use page_lock::*;
pub use stats::*;
pub use status::pagealloc_status;
pub use tcache::*;
