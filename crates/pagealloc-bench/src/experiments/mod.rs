//! The experiments of `pagealloc bench`, one file each.

pub mod buddy;
pub mod pagealloc_micro;
pub mod pagetypeinfo;

use crate::harness::Experiment;

/// Every experiment, in the order `pagealloc bench` runs them.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(buddy::Buddy), Box::new(pagetypeinfo::PageTypeInfo), Box::new(pagealloc_micro::PageallocMicro)]
}
