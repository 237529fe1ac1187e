//! The C entry points of `sqlite3_pcache_methods2` ([`METHODS`]). Each one
//! turns SQLite's opaque cache pointer back into its [`CacheHandle`] and calls
//! the [`Group`] method of the same name; none of them can unwind into C
//! (a panic aborts instead: SQLite cannot handle one).

use crate::ffi::{PcacheMethods2, Sqlite3Pcache, Sqlite3PcachePage, SQLITE_OK};
use crate::group::Group;
use crate::page::PagePtr;
use crate::{CacheStats, Config, CreateError};
use parking_lot::Mutex;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, OnceLock};

/// The group `xCreate` makes caches in: set once, by [`crate::install`] or
/// by the first `xCreate` after a lazy install.
pub(crate) static GLOBAL: OnceLock<Arc<Group>> = OnceLock::new();

/// A lazy install's configuration (the preload path), until the first
/// `xCreate` builds the group from it: a process the preload passes through
/// without opening a database never maps an arena.
pub(crate) static PENDING: Mutex<Option<Config>> = Mutex::new(None);

/// The process's group, built now if a lazy install left it pending.
pub(crate) fn global_group() -> Option<&'static Arc<Group>> {
    if let Some(g) = GLOBAL.get() {
        return Some(g);
    }
    let mut pending = PENDING.lock();
    // Another thread may have built it while this one waited for the lock.
    if let Some(g) = GLOBAL.get() {
        return Some(g);
    }
    let cfg = pending.take()?;
    match Group::new(&cfg) {
        Ok(g) => GLOBAL.get_or_init(|| g).into(),
        Err(e) => {
            eprintln!("pagealloc-sqlite: no page cache: {e}");
            None
        }
    }
}

/// What SQLite's `sqlite3_pcache*` points to.
pub(crate) struct CacheHandle {
    group: Arc<Group>,
    id: u32,
}

/// The methods table to pass to `sqlite3_config(SQLITE_CONFIG_PCACHE2, ..)`.
pub static METHODS: PcacheMethods2 = PcacheMethods2 {
    iVersion: 1,
    pArg: std::ptr::null_mut(),
    xInit: Some(x_init),
    xShutdown: Some(x_shutdown),
    xCreate: Some(x_create),
    xCachesize: Some(x_cachesize),
    xPagecount: Some(x_pagecount),
    xFetch: Some(x_fetch),
    xUnpin: Some(x_unpin),
    xRekey: Some(x_rekey),
    xTruncate: Some(x_truncate),
    xDestroy: Some(x_destroy),
    xShrink: Some(x_shrink),
};

impl Group {
    /// `xCreate` on this group: the handle SQLite (or a test) passes to the
    /// other [`METHODS`], or why there is none.
    ///
    /// # Errors
    /// [`CreateError`] for a page size SQLite cannot have, an oversized
    /// extra area, or a budget without room for one more cache's page.
    pub fn create_cache(
        self: &Arc<Self>,
        sz_page: usize,
        sz_extra: usize,
        purgeable: bool,
    ) -> Result<*mut Sqlite3Pcache, CreateError> {
        let id = self.create(sz_page, sz_extra, purgeable)?;
        let h = Box::new(CacheHandle { group: Arc::clone(self), id });
        Ok(Box::into_raw(h).cast())
    }
}

/// The counters of a cache made by `xCreate` or [`Group::create_cache`].
///
/// # Safety
/// `cache` must be such a cache, not yet destroyed.
#[must_use]
pub unsafe fn cache_stats(cache: *mut Sqlite3Pcache) -> CacheStats {
    // SAFETY: the caller's contract.
    let h = unsafe { handle(cache) };
    h.group.stats(h.id)
}

/// # Safety
/// `cache` came from `create_cache` and was not destroyed.
unsafe fn handle<'a>(cache: *mut Sqlite3Pcache) -> &'a CacheHandle {
    // SAFETY: `create_cache` made it from a Box<CacheHandle>; only
    // `x_destroy` frees it, after which SQLite does not use it.
    unsafe { &*cache.cast::<CacheHandle>() }
}

/// `xInit`: nothing to set up (the group exists or is pending).
///
/// # Safety
/// None beyond SQLite's: `_arg` is unused.
unsafe extern "C" fn x_init(_arg: *mut c_void) -> c_int {
    SQLITE_OK
}

/// `xShutdown`: caches are destroyed one by one; nothing global to undo.
///
/// # Safety
/// None: `_arg` is unused.
unsafe extern "C" fn x_shutdown(_arg: *mut c_void) {}

/// `xCreate`: a cache in the process's group, or null (SQLITE_NOMEM).
///
/// # Safety
/// None: plain integers.
unsafe extern "C" fn x_create(sz_page: c_int, sz_extra: c_int, purgeable: c_int) -> *mut Sqlite3Pcache {
    let Some(g) = global_group() else { return std::ptr::null_mut() };
    let (Ok(page), Ok(extra)) = (usize::try_from(sz_page), usize::try_from(sz_extra)) else {
        return std::ptr::null_mut();
    };
    // Null makes SQLite report SQLITE_NOMEM, the one error xCreate has.
    g.create_cache(page, extra, purgeable != 0).unwrap_or(std::ptr::null_mut())
}

/// `xCachesize`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_cachesize(cache: *mut Sqlite3Pcache, n: c_int) {
    // SAFETY: SQLite passes a cache xCreate made and has not destroyed.
    let h = unsafe { handle(cache) };
    h.group.cachesize(h.id, n);
}

/// `xPagecount`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_pagecount(cache: *mut Sqlite3Pcache) -> c_int {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    c_int::try_from(h.group.pagecount(h.id)).unwrap_or(c_int::MAX)
}

/// `xFetch`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_fetch(cache: *mut Sqlite3Pcache, key: c_uint, create: c_int) -> *mut Sqlite3PcachePage {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    h.group.fetch(h.id, key, create)
}

/// `xUnpin`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed, and `page` came from its `xFetch` and was not discarded; calls on one cache do not overlap.
unsafe extern "C" fn x_unpin(cache: *mut Sqlite3Pcache, page: *mut Sqlite3PcachePage, discard: c_int) {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    // SAFETY: SQLite unpins only pages this cache's xFetch returned.
    let p = unsafe { PagePtr::from_sqlite(page) };
    h.group.unpin(h.id, p, discard != 0);
}

/// `xRekey`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed, and `page` came from its `xFetch` and was not discarded; calls on one cache do not overlap.
unsafe extern "C" fn x_rekey(cache: *mut Sqlite3Pcache, page: *mut Sqlite3PcachePage, old: c_uint, new: c_uint) {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    // SAFETY: as in x_unpin.
    let p = unsafe { PagePtr::from_sqlite(page) };
    h.group.rekey(h.id, p, old, new);
}

/// `xTruncate`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_truncate(cache: *mut Sqlite3Pcache, limit: c_uint) {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    h.group.truncate(h.id, limit);
}

/// `xDestroy`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_destroy(cache: *mut Sqlite3Pcache) {
    // SAFETY: as in x_cachesize; after this call SQLite never uses `cache`.
    let h = unsafe { Box::from_raw(cache.cast::<CacheHandle>()) };
    h.group.destroy(h.id);
}

/// `xShrink`: see the [`Group`] method of the same name.
///
/// # Safety
/// SQLite's contract: `cache` came from `xCreate` and is not destroyed; calls on one cache do not overlap.
unsafe extern "C" fn x_shrink(cache: *mut Sqlite3Pcache) {
    // SAFETY: as in x_cachesize.
    let h = unsafe { handle(cache) };
    h.group.shrink(h.id);
}
