//! The `kiln` command.

use clap::Parser;

/// mimalloc: a compile makes tens of thousands of short-lived allocations, which glibc's
/// allocator serves at several times the cost (`kiln bench compile-cost`).
#[global_allocator]
static ALLOCATOR: MiMalloc = MiMalloc;

/// mimalloc's plain entry points wherever its blocks are aligned enough (every block of 16
/// bytes or more is 16-aligned, a smaller one to its size), its aligned ones otherwise: the
/// aligned entry points take a slow path for any block past 1 KiB, which is most of a
/// compile's vectors.
struct MiMalloc;

/// The alignment every mimalloc block of at least this size has (`MI_MAX_ALIGN_SIZE`).
const MI_MAX_ALIGN: usize = 16;

fn plain(layout: std::alloc::Layout) -> bool {
    layout.align() <= MI_MAX_ALIGN && layout.align() <= layout.size()
}

// SAFETY: each entry point returns a block of at least `layout.size()` bytes aligned to
// `layout.align()` or null (mimalloc's contract, above), and blocks are freed by mimalloc.
unsafe impl std::alloc::GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::*;
        // SAFETY: mimalloc's allocation functions take any size and alignment.
        unsafe {
            if plain(layout) {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::*;
        // SAFETY: as `alloc`.
        unsafe {
            if plain(layout) {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::*;
        // SAFETY: `ptr` came from this allocator with `layout`; a reallocated block keeps
        // the alignment rule of its new size.
        unsafe {
            if layout.align() <= MI_MAX_ALIGN && layout.align() <= new_size {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

fn main() -> miette::Result<()> {
    kiln_front::install_quiet_panic_hook();
    kiln::cli::Cli::parse().run()
}
