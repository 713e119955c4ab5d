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

/// Whether a block of `size` bytes from mimalloc's plain entry points is aligned to `align`.
fn plain(align: usize, size: usize) -> bool {
    align <= MI_MAX_ALIGN && align <= size
}

// SAFETY: each entry point returns a block of at least `layout.size()` bytes aligned to
// `layout.align()` or null (mimalloc's contract, above), and blocks are freed by mimalloc.
unsafe impl std::alloc::GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::*;
        // SAFETY: mimalloc's allocation functions take any size and alignment.
        unsafe {
            if plain(layout.align(), layout.size()) {
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
            if plain(layout.align(), layout.size()) {
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
            if plain(layout.align(), new_size) {
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

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout};

    /// Every block is aligned as asked, from each entry point, across the sizes where the
    /// plain and the aligned ones take over from each other; a reallocated block keeps its
    /// contents.
    #[test]
    fn blocks_are_aligned_as_asked_and_keep_their_contents() {
        let a = super::MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [
                1, 3, 8, 15, 16, 17, 24, 40, 48, 1000, 1024, 1025, 1200, 5000,
            ] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; each block is freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(
                        !p.is_null() && p as usize % align == 0,
                        "alloc {size}/{align}"
                    );
                    for k in 0..size {
                        *p.add(k) = k as u8;
                    }
                    let grown = size * 3 + 7;
                    let q = a.realloc(p, layout, grown);
                    assert!(q as usize % align == 0, "realloc {size}/{align} → {grown}");
                    assert!((0..size).all(|k| *q.add(k) == k as u8), "realloc lost data");
                    a.dealloc(q, Layout::from_size_align(grown, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(z as usize % align == 0, "alloc_zeroed {size}/{align}");
                    assert!((0..size).all(|k| *z.add(k) == 0), "alloc_zeroed not zero");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
