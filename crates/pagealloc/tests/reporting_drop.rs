//! The reporter thread ends with its allocator (it holds only a weak
//! reference between passes). Alone in its binary: it counts this process's
//! reporter threads by name.

use pagealloc::{Config, PageAllocator};

fn reporters() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == "pagealloc-repor") // comm keeps 15 bytes
        .count()
}

/// The count once it settles (a new thread names itself after it starts;
/// a joined one leaves `/proc/self/task` a moment after the join returns:
/// the kernel wakes the joiner when it clears the thread's tid, before it
/// releases the task, and on a loaded host the gap shows).
fn settled(want: usize) -> usize {
    for _ in 0..100 {
        if reporters() == want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    reporters()
}

#[test]
fn dropping_the_allocator_stops_its_reporter() {
    assert_eq!(reporters(), 0);
    let a = PageAllocator::new(Config::new().arena_bytes(4 << 20).page_reporting_delay_ms(0)).unwrap();
    let b = a.clone();
    assert!(a.reporting().page_reporting_stats().enabled);
    assert_eq!(settled(1), 1);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(a.reporting().page_reporting_stats().passes > 0, "the background thread runs passes");
    drop(a);
    assert_eq!(reporters(), 1, "a clone still holds the allocator");
    drop(b);
    assert_eq!(settled(0), 0, "the drop joined the reporter");
    // Switched on at run time: started then, stopped with the allocator.
    let c = PageAllocator::new(Config::new().arena_bytes(4 << 20).page_reporting(false)).unwrap();
    assert_eq!(reporters(), 0);
    assert!(c.reporting().set_page_reporting(true));
    assert_eq!(settled(1), 1);
    drop(c);
    assert_eq!(settled(0), 0);
}
