//! `DirectFileSource`: the same bytes as buffered reads (through a mapping,
//! with readahead), the page holding the end, writes that keep the size,
//! the fallback where `O_DIRECT` is refused, `/dev/shm`.

use super::super::{FileSource, PageCache, PageCacheConfig};
use super::{open_file, DirectFileSource, IoMode};
use crate::{Config, PageAllocator, PageSource, PAGE_SIZE};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn cache(mib: u64) -> PageCache {
    let a = Arc::new(PageAllocator::new(Config::small(mib << 20).backing(crate::Backing::Anonymous)).unwrap());
    PageCache::new(a, PageCacheConfig { kswapd: false }).unwrap()
}

fn temp(dir: &Path, what: &str) -> PathBuf {
    dir.join(format!("pagealloc-direct-{what}-{}", std::process::id()))
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(7) % 253) as u8).collect()
}

/// Read the whole file through a mapping over `src`.
fn read_through(src: Arc<dyn PageSource>, len: usize) -> Vec<u8> {
    let pc = cache(8);
    let m = pc.mapping(1, src);
    let mut buf = vec![0u8; len];
    assert_eq!(m.read(0, &mut buf).unwrap(), len);
    buf
}

/// A file of `len` bytes in `dir`, read directly, buffered, and through
/// mappings over both: all the same. Returns the direct source's mode.
fn same_as_buffered(dir: &Path, len: usize) -> IoMode {
    let path = temp(dir, "same");
    let d = data(len);
    std::fs::write(&path, &d).unwrap();
    let src = DirectFileSource::open(&path, false).unwrap();
    let mode = src.mode();
    assert_eq!(src.size(), len as u64);
    assert_eq!(src.nr_pages(), Some(len.div_ceil(PAGE_SIZE) as u64));
    let direct = read_through(Arc::new(src), len);
    let buffered = read_through(Arc::new(FileSource(std::fs::File::open(&path).unwrap())), len);
    let _ = std::fs::remove_file(&path);
    assert!(direct == d, "direct read differs");
    assert!(buffered == d, "buffered read differs");
    mode
}

#[test]
fn direct_reads_are_the_bytes_buffered_reads_give() {
    // Whole pages, a tail, a file of less than a page; on the disk file
    // system of the temporary directory.
    for len in [40 * PAGE_SIZE, 37 * PAGE_SIZE + 123, 100] {
        let mode = same_as_buffered(&std::env::temp_dir(), len);
        eprintln!("{}: {mode:?}", std::env::temp_dir().display());
    }
}

#[test]
fn dev_shm_reads_the_same_in_whichever_mode_it_grants() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let mode = same_as_buffered(shm, 9 * PAGE_SIZE + 5);
    eprintln!("/dev/shm: {mode:?}");
}

#[test]
fn the_page_holding_the_end_reads_zeros_past_it() {
    let path = temp(&std::env::temp_dir(), "tail");
    let len = 2 * PAGE_SIZE + 100;
    std::fs::write(&path, data(len)).unwrap();
    let src = DirectFileSource::open(&path, false).unwrap();
    // Straight into aligned pages, two of them past the end.
    let mut pages = vec![[0xffu8; PAGE_SIZE]; 5];
    let mut bounce: Vec<Box<super::Bounce>> = (0..5).map(|_| super::Bounce::new()).collect();
    let mut bufs: Vec<&mut [u8]> = bounce.iter_mut().map(|b| &mut b.0[..]).collect();
    for b in bufs.iter_mut() {
        b.fill(0xff);
    }
    src.read_pages(0, &mut bufs).unwrap();
    for (k, p) in pages.iter_mut().enumerate() {
        p.copy_from_slice(bufs[k]);
    }
    let flat = pages.concat();
    assert_eq!(&flat[..len], &data(len)[..]);
    assert!(flat[len..].iter().all(|&b| b == 0), "zeros past the end");
    // An unaligned caller's buffer goes through a bounce page.
    let mut odd = vec![0u8; PAGE_SIZE + 1];
    src.read_page(2, &mut odd[1..]).unwrap();
    assert_eq!(&odd[1..101], &data(len)[2 * PAGE_SIZE..]);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn writes_keep_the_size_or_grow_it_to_their_end() {
    let path = temp(&std::env::temp_dir(), "write");
    let len = 2 * PAGE_SIZE + 100;
    std::fs::write(&path, data(len)).unwrap();
    let src = Arc::new(DirectFileSource::open(&path, true).unwrap());
    let pc = cache(8);
    let m = pc.mapping(1, src.clone());
    // Rewrite bytes of the page that holds the end: the file keeps its size.
    m.write(2 * PAGE_SIZE as u64 + 10, b"tail").unwrap();
    m.fsync().unwrap();
    let mut want = data(len);
    want[2 * PAGE_SIZE + 10..2 * PAGE_SIZE + 14].copy_from_slice(b"tail");
    assert_eq!(std::fs::read(&path).unwrap(), want, "size and bytes kept");
    // A page past the end: the file grows to the write's end, as `pwrite`
    // grows it; the page between reads as zeros.
    m.write(4 * PAGE_SIZE as u64, b"next").unwrap();
    m.fsync().unwrap();
    let got = std::fs::read(&path).unwrap();
    assert_eq!(got.len(), 4 * PAGE_SIZE + 4);
    assert_eq!(src.size(), 4 * PAGE_SIZE as u64 + 4);
    assert_eq!(&got[..len], &want[..]);
    assert!(got[len..4 * PAGE_SIZE].iter().all(|&b| b == 0));
    assert_eq!(&got[4 * PAGE_SIZE..4 * PAGE_SIZE + 4], b"next");
    // Set the size down: reads stop there.
    src.set_size(PAGE_SIZE as u64 + 1).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), PAGE_SIZE as u64 + 1);
    drop(m);
    drop(pc);
    let _ = std::fs::remove_file(&path);
}

/// A write that crosses the end of the file inside its last page keeps
/// every byte through writeback and eviction, and the file grows to the
/// write's end, as `pwrite` grows it (writeback used to cut the page back
/// to the old size: bytes 10,000..10,200 read as zeros afterwards).
#[test]
fn a_write_across_the_end_survives_writeback_and_eviction() {
    let path = temp(&std::env::temp_dir(), "eof");
    std::fs::write(&path, data(10_000)).unwrap();
    let src = Arc::new(DirectFileSource::open(&path, true).unwrap());
    let pc = cache(8);
    let m = pc.mapping(1, src.clone());
    assert_eq!(m.write(9_800, &[0x66; 400]).unwrap(), 400);
    m.fsync().unwrap();
    for _ in 0..8 {
        pc.shrink(1 << 20);
    }
    assert_eq!(m.nr_pages(), 0, "evicted");
    let mut back = [0u8; 400];
    assert_eq!(m.read(9_800, &mut back).unwrap(), 400);
    assert!(back.iter().all(|&b| b == 0x66), "{:?}", &back[190..210]);
    assert_eq!(src.size(), 10_200);
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len(), 10_200);
    assert_eq!(&on_disk[..9_800], &data(10_000)[..9_800]);
    assert!(on_disk[9_800..].iter().all(|&b| b == 0x66));
    drop(m);
    drop(pc);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_refused_o_direct_falls_back_to_buffered() {
    let path = temp(&std::env::temp_dir(), "fallback");
    let len = 3 * PAGE_SIZE + 7;
    std::fs::write(&path, data(len)).unwrap();
    // A file system that refuses O_DIRECT at open (EINVAL), as tmpfs did
    // before Linux 6.6.
    let refuse = |direct: bool| {
        if direct {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        } else {
            open_file(&path, false, false)
        }
    };
    let src = DirectFileSource::from_open(refuse).unwrap();
    assert_eq!(src.mode(), IoMode::Buffered);
    assert_eq!(read_through(Arc::new(src), len), data(len));
    // Other errors are errors.
    let missing = temp(&std::env::temp_dir(), "missing");
    assert_eq!(DirectFileSource::open(&missing, false).err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
    let _ = std::fs::remove_file(&path);
}
