// The allocator's modules (its `Mm`, with the core and the layers' state)
// are not the façade's.
fn main() {
    let _ = pagealloc::mm::Mm::new;
    let _ = pagealloc_core::page_alloc::Core::new;
}
