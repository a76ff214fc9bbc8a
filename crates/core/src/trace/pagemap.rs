//! The id-to-page map of a trace replay: each object of a trace gets dense page indices
//! in order of first appearance. The simulator's trace workload and the native runner
//! both map ids with it, so both touch the same pages.

use super::Request;
use crate::scenario::PAGE_SIZE;

/// Object ids of a trace -> their pages: each new object gets the next `pages` page
/// indices (dense, in order of first appearance) and keeps them. The simulator and the
/// native runner map ids with this one type, so both touch the same pages. Ids below
/// DENSE_IDS are looked up by index (traces usually number objects densely), the rest in
/// a hash map.
pub struct PageMap {
    /// By id: (first page, pages); (0, 0) is an empty slot (no object has zero pages).
    dense: Vec<(u32, u32)>,
    sparse: rustc_hash::FxHashMap<u64, (u32, u32)>,
    next_page: u64,
    objects: u64,
    /// Most bytes the map and the pages it hands out may take (see [`PageMap::limit`]).
    limit_bytes: u64,
    /// Host bytes each page handed out costs its user (a page-cache entry or a PTE).
    page_bytes: u64,
}

impl Default for PageMap {
    fn default() -> Self {
        PageMap {
            dense: Vec::new(),
            sparse: Default::default(),
            next_page: 0,
            objects: 0,
            limit_bytes: u64::MAX,
            page_bytes: 0,
        }
    }
}

/// Ids below this are looked up by index (8 bytes per id up to the largest seen).
const DENSE_IDS: u64 = 1 << 26;

/// Host bytes of one sparse id (a hash entry of 16 bytes at its load factor, and the
/// table's doubling).
const SPARSE_ID_BYTES: u64 = 40;

/// Pages of an object of `size` bytes (at least one).
fn object_pages(size: u64) -> u64 {
    size.div_ceil(PAGE_SIZE).max(1)
}

impl PageMap {
    /// Refuse objects that would take the map, plus `page_bytes` per page handed out,
    /// above `limit_bytes` (the run's memory budget).
    pub fn limit(&mut self, limit_bytes: u64, page_bytes: u64) {
        self.limit_bytes = limit_bytes;
        self.page_bytes = page_bytes;
    }

    /// Host bytes the map and its pages take with `pages` pages and `dense` dense slots.
    fn bytes(&self, pages: u64, dense: u64) -> u64 {
        pages
            .saturating_mul(self.page_bytes)
            .saturating_add(dense * 8)
            .saturating_add(self.sparse.len() as u64 * SPARSE_ID_BYTES)
    }

    /// The (first page, pages) of a known object.
    #[inline]
    pub fn get(&self, id: u64) -> Option<(u32, u32)> {
        if id < DENSE_IDS {
            self.dense.get(id as usize).copied().filter(|v| v.1 != 0)
        } else {
            self.sparse.get(&id).copied()
        }
    }

    /// Start loading an id's slot (no effect on results).
    #[inline]
    pub fn prefetch(&self, id: u64) {
        if let Some(slot) = self.dense.get(id as usize) {
            crate::mm::prefetch(slot);
        }
    }

    /// The pages of a request's object, assigning them if the object is new (then `true`).
    /// A known object (most requests) is a look-up inlined into the caller; only a new one
    /// builds the `Result` with its error string out of line.
    #[inline]
    pub fn map(&mut self, req: &Request) -> std::result::Result<(u32, u32, bool), String> {
        match self.get(req.obj) {
            Some((b, p)) => Ok((b, p, false)),
            None => self.map_new(req),
        }
    }

    /// [`PageMap::map`] of an object not seen before.
    #[cold]
    #[inline(never)]
    fn map_new(&mut self, req: &Request) -> std::result::Result<(u32, u32, bool), String> {
        let pages = object_pages(req.size);
        let end = self.next_page.saturating_add(pages);
        if end > u32::MAX as u64 {
            return Err(format!(
                "object {} of {} bytes takes the trace's distinct objects to {end} pages: allowed at most {} (page indices are 32-bit)",
                req.obj,
                req.size,
                u32::MAX
            ));
        }
        let dense = if req.obj < DENSE_IDS && req.obj as usize >= self.dense.len() {
            (req.obj + 1).next_power_of_two().min(DENSE_IDS)
        } else {
            self.dense.len() as u64
        };
        let need = self.bytes(end, dense);
        if need > self.limit_bytes {
            return Err(format!(
                "object {} of {} bytes takes the trace's distinct objects to {end} pages, {} MiB of host memory: above the run's memory budget of {} MiB for this trace (--max-memory)",
                req.obj,
                req.size,
                need >> 20,
                self.limit_bytes >> 20
            ));
        }
        let base = self.next_page as u32;
        let pages = pages as u32;
        self.next_page = end;
        self.objects += 1;
        let v = (base, pages);
        if req.obj < DENSE_IDS {
            let i = req.obj as usize;
            if i >= self.dense.len() {
                crate::mm::mm_types::grow_table(&mut self.dense, dense as usize);
            }
            self.dense[i] = v;
        } else {
            self.sparse.insert(req.obj, v);
        }
        Ok((base, pages, true))
    }

    /// Distinct objects seen.
    pub fn len(&self) -> u64 {
        self.objects
    }

    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// Pages assigned so far.
    pub fn pages(&self) -> u64 {
        self.next_page
    }
}
