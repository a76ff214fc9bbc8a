//! The accessed bits of a memoryless workload, drawn when the kernel reads them
//! (`access_model = "sampled"`).
//!
//! A usemem thread with `random = true` writes a uniformly random page of its span at
//! every step. Between two looks by the kernel, such a write to a page whose PTE is
//! present and writable only sets the PTE's young and dirty bits (and the accessed bit of
//! the PMD entry above it, which the MMU sets on its way down): nothing the kernel runs,
//! nothing it sees until it reads the bits. The kernel reads them in four places, each of
//! which calls [`super::MmStruct::sampled_sync`] first: MGLRU's page-table walk
//! (walk_pte_range, and walk_pmd_range's test of the PMD's accessed bit), lru_gen's
//! look-around, and the rmap walk of folio_referenced. Every other write faults (a PTE not
//! present, or write-protected for copy-on-write): those are the draws the thread still
//! makes one by one, as kernel entries.
//!
//! So instead of one event per write, the thread counts its draws (`drawn`), and each
//! piece of its span (a *segment*: the span cut at every 64th page, the words of the
//! faulting bitmap below) remembers the count at which its bits were last brought up to
//! date. Bringing a segment up to date after `k` more draws sets each of its present,
//! writable PTEs young (and dirty) with probability `1 - (1 - 1/n)^k`, `n` the span's
//! pages: the exact probability that one of `k` uniform draws hit the page. The pages are
//! drawn independently of one another; the kernel-visible consequences of that and of the
//! other simplifications are argued in docs/model.md ("Sampled access"):
//!
//! - Independence: with a fixed number of draws the pages' hit counts are multinomial, so
//!   two pages' young bits are slightly negatively correlated (covariance about
//!   `-(k/n^2) e^(-2k/n)`). Over a page-table block of `m` pages this changes the variance
//!   of its young count (which feeds the walk's Bloom filter) by at most a factor `m/n`,
//!   never its mean.
//! - Faulting draws: each draw faults with probability `F/n` (`F` the span's pages that
//!   are not present or write-protected), independently of the non-faulting draws' pages.
//!   The thread draws the number of non-faulting draws before the next faulting one from
//!   the geometric distribution and the faulting page uniformly among the `F` (a Fenwick
//!   tree over 4,096-page blocks of a faulting bitmap, then counts of its 512-page
//!   groups: O(log n)). It commits at most `n/1024` draws at once (see `usemem.rs`), and
//!   draws again with the `F` of that moment, so a page that starts to fault in between
//!   is seen at most `n/1024` draws late: in a steady state that makes about 1/2048 of
//!   the faulting writes late by half a chunk.
//! - Time: a chunk's draws are committed when it starts, as a per-access thread runs up to
//!   a quantum ahead of the others; a look in the middle of a chunk sees all of its draws.
//! - Text: every write runs the process's text, so its present PTEs are young at a look
//!   if any write was made since the last; the thread fetches the text (faulting back a
//!   page reclaim took) at each chunk's first write, and with a text a chunk is one
//!   engine quantum of writes at most.
//!
//! A segment is small so that the kernel's looks at one page (the rmap walk of a folio
//! reclaim takes, and a fault that maps or unmaps a page, which brings its segment up to
//! date first) cost a few draws, not a page table's; its update draws only over the
//! segment's writable pages, read from the faulting bitmap's word.
//!
//! The state costs about 0.44 bytes per page of a sampled area (a faulting bit, a count
//! per 512 pages, a Fenwick counter per 4,096, a segment per 64 pages) and nothing for
//! other areas.

use super::mm_types::pte;
use super::PTRS_PER_PTE;
use crate::engine::rng::Rng;
use rand::Rng as _;

/// A sampled thread commits at most `n >> CHUNK_SHIFT` draws at once (`n` its span's
/// pages) before it draws its next faulting draw again with the faulting pages of that
/// moment: a page that starts to fault meanwhile is seen at most 1/1024 of its mean reuse
/// interval late, which leaves the fault rate low by about 1/2048 (docs/model.md); 1/1024
/// rather than 1/256 costs seed-001 7% more instructions.
pub const CHUNK_SHIFT: u32 = 10;

/// The state's bytes per page of a sampled area, for the memory estimate: a faulting bit
/// (1/8), a group count per 512 pages (2/512), a Fenwick counter per 4,096 pages
/// (4/4096), and per 64 pages a segment (start, thread, sync count: 16) and a word's
/// first segment (4).
pub const SAMPLED_BYTES_PER_PAGE: f64 = 1.0 / 8.0 + 2.0 / 512.0 + 4.0 / 4096.0 + 20.0 / 64.0;

/// Pages per word of the faulting bitmap, and at most per segment.
const SEG_PAGES: usize = 64;

/// Above this probability that a page was hit, a segment's update draws each page
/// (a uniform draw per page) instead of skipping geometrically (a logarithm per hit):
/// the two cost the same at about one hit in eight pages.
const DENSE_HIT: f64 = 0.125;

/// One thread of a sampled area: its span of the area, the draws it has made, and its
/// random stream (its faulting draws, and the young bits of its pages' segments).
pub struct SampledThread {
    pub lo: u32,
    pub hi: u32,
    /// Draws made so far (faulting or not).
    pub drawn: u64,
    /// Faulting pages in the span (kept by [`SampledArea::note`]).
    faulting: u64,
    /// ln(1 - 1/n), n the span's pages: the log-probability that one draw misses a page.
    log_miss: f64,
    pub rng: Rng,
}

/// The sampled state of one process's area (pages `0..pages`).
pub struct SampledArea {
    pages: u32,
    pub threads: Vec<SampledThread>,
    /// Segments: segment `i` covers `[segs[i].start, segs[i + 1].start)` (the last to
    /// `pages`), all of it in thread `segs[i].thread`'s span and one word of `faulting`.
    segs: Vec<Segment>,
    /// The first segment of each word of `faulting`; None when segment `w` is word `w`
    /// (every span starts at a multiple of 64 pages, as one thread's does).
    word_seg: Option<Vec<u32>>,
    /// The process's text (`base`, `pages`), run by every write of every thread: its
    /// PTEs are young once any write was made since they were last brought up to date.
    text: Option<(u32, u32)>,
    /// The writes of all threads (the sum of their `drawn`) when the text was brought up
    /// to date.
    text_sync: u64,
    /// Threads in their sampled passes: the process runs (lru_gen_use_mm) all along.
    pub writing: u32,
    /// One bit per page: set when a write to it faults (not present, or write-protected).
    faulting: Vec<u64>,
    /// The set bits of each group of [`GROUP_WORDS`] words of `faulting` (512 pages, one
    /// cache line of bits).
    group_count: Vec<u16>,
    /// A Fenwick tree (1-based) over blocks of [`BLOCK_GROUPS`] groups (4,096 pages):
    /// their set bits. A select descends it, steps through one line of `group_count` and
    /// counts the group's words, which share the line it must read anyway: small (4 bytes
    /// per 4,096 pages), the tree stays in cache beside a large frame table, where one
    /// over the groups missed on its lower levels.
    fen: Vec<u32>,
}

/// Words of the faulting bitmap per group: one 64-byte cache line.
const GROUP_WORDS: usize = 8;

/// Groups per block, a Fenwick entry.
const BLOCK_GROUPS: usize = 8;

/// A piece of a thread's span within one word of the faulting bitmap.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    /// Its first page.
    start: u32,
    /// The thread whose span holds it.
    thread: u32,
    /// The thread's `drawn` when the segment's bits were last brought up to date.
    sync: u64,
}

/// How a segment's update treats one page whose PTE has just changed (see
/// [`SampledArea::note`]): as writable-present or not, whatever its PTE says now.
#[derive(Clone, Copy)]
struct Except {
    vpn: u32,
    candidate: bool,
}

impl SampledArea {
    /// The area of `pages` pages split into the threads' `spans` (contiguous, in order,
    /// covering it), each thread with its random stream; which pages fault is read from
    /// the area's PTEs and write protection as they are.
    pub fn new(
        pages: u32,
        spans: Vec<((u32, u32), Rng)>,
        text: Option<(u32, u32)>,
        ptes: &[u32],
        wrprotect: &[u64],
    ) -> Self {
        let mut segs: Vec<Segment> = Vec::new();
        let mut threads = Vec::new();
        for (t, ((lo, hi), rng)) in spans.into_iter().enumerate() {
            let n = (hi - lo).max(1) as f64;
            threads.push(SampledThread {
                lo,
                hi,
                drawn: 0,
                faulting: 0,
                log_miss: (-1.0 / n).ln_1p(),
                rng,
            });
            let mut a = lo;
            while a < hi {
                let word_end = ((a as usize / SEG_PAGES + 1) * SEG_PAGES) as u32;
                segs.push(Segment {
                    start: a,
                    thread: t as u32,
                    sync: 0,
                });
                a = word_end.min(hi);
            }
        }
        let words = (pages as usize).div_ceil(SEG_PAGES);
        let mut s = 0usize;
        let mut word_seg = Vec::with_capacity(words);
        for w in 0..words {
            while s + 1 < segs.len() && segs[s + 1].start as usize <= w * SEG_PAGES {
                s += 1;
            }
            word_seg.push(s as u32);
        }
        let identity =
            segs.len() == words && word_seg.iter().enumerate().all(|(w, &s)| s as usize == w);
        let mut faulting = vec![0u64; words];
        for vpn in 0..pages {
            if pte::access_faults(ptes[vpn as usize], true, wp_bit(wrprotect, vpn)) {
                faulting[vpn as usize / 64] |= 1 << (vpn % 64);
            }
        }
        let groups = words.div_ceil(GROUP_WORDS);
        let mut area = SampledArea {
            pages,
            threads,
            segs,
            word_seg: (!identity).then_some(word_seg),
            text,
            text_sync: 0,
            writing: 0,
            faulting,
            group_count: vec![0; groups],
            fen: vec![0; groups.div_ceil(BLOCK_GROUPS) + 1],
        };
        for w in 0..words {
            let c = area.faulting[w].count_ones();
            area.group_count[w / GROUP_WORDS] += c as u16;
            area.fen_add(w / GROUP_WORDS / BLOCK_GROUPS, c as i64);
        }
        for t in 0..area.threads.len() {
            let (lo, hi) = (area.threads[t].lo, area.threads[t].hi);
            area.threads[t].faulting = area.rank(hi) - area.rank(lo);
        }
        area
    }

    fn fen_add(&mut self, block: usize, d: i64) {
        let mut i = block + 1;
        while i < self.fen.len() {
            self.fen[i] = (self.fen[i] as i64 + d) as u32;
            i += i & i.wrapping_neg();
        }
    }

    /// Faulting pages in blocks `0..block`.
    fn fen_prefix(&self, block: usize) -> u64 {
        let (mut i, mut sum) = (block, 0u64);
        while i > 0 {
            sum += self.fen[i] as u64;
            i &= i - 1;
        }
        sum
    }

    /// Faulting pages in `[0, x)`.
    pub fn rank(&self, x: u32) -> u64 {
        let (w, b) = (x as usize / 64, x % 64);
        let g = w / GROUP_WORDS;
        let block = g / BLOCK_GROUPS;
        let groups: u64 = self.group_count[block * BLOCK_GROUPS..g]
            .iter()
            .map(|&c| c as u64)
            .sum();
        let words: u64 = self.faulting[g * GROUP_WORDS..w]
            .iter()
            .map(|v| v.count_ones() as u64)
            .sum();
        let part = if b == 0 {
            0
        } else {
            (self.faulting[w] & ((1u64 << b) - 1)).count_ones() as u64
        };
        self.fen_prefix(block) + groups + words + part
    }

    /// Faulting pages in thread `t`'s span.
    pub fn faulting_in(&self, t: usize) -> u64 {
        self.threads[t].faulting
    }

    /// The faulting page whose rank (faulting pages before it) is `r` (< the total).
    pub fn select(&self, r: u64) -> u32 {
        let (g, mut left) = self.select_group(r);
        // The group's word that holds it, then bit `left` (0-based) of that word.
        let mut w = g * GROUP_WORDS;
        loop {
            let c = self.faulting[w].count_ones() as u64;
            if left < c {
                break;
            }
            left -= c;
            w += 1;
        }
        let mut bits = self.faulting[w];
        for _ in 0..left {
            bits &= bits - 1;
        }
        w as u32 * 64 + bits.trailing_zeros()
    }

    /// The group that holds the faulting page of rank `r` (< the total), and the page's
    /// rank within the group.
    fn select_group(&self, r: u64) -> (usize, u64) {
        // The last block b with fen_prefix(b) <= r, by the Fenwick tree's binary descent.
        let (mut pos, mut left) = (0usize, r);
        let mut step = (self.fen.len() - 1).next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next < self.fen.len() && (self.fen[next] as u64) <= left {
                pos = next;
                left -= self.fen[next] as u64;
            }
            step >>= 1;
        }
        // The block's group that holds it.
        let mut g = pos * BLOCK_GROUPS;
        while left >= self.group_count[g] as u64 {
            left -= self.group_count[g] as u64;
            g += 1;
        }
        debug_assert!(
            g < (pos + 1) * BLOCK_GROUPS,
            "select: rank {r} past block {pos}"
        );
        (g, left)
    }

    /// The PTE at `vpn` (or its write protection) changed: keep the faulting bitmap. A
    /// page that starts or stops faulting first has its segment brought up to date as
    /// things stood before the change, so no draw is credited to it while it faulted.
    pub fn note(&mut self, vpn: u32, ptes: &mut [u32], wrprotect: &[u64], pmd_young: &mut [u64]) {
        if vpn >= self.pages {
            return;
        }
        let (w, bit) = (vpn as usize / 64, 1u64 << (vpn % 64));
        let was = self.faulting[w] & bit != 0;
        let now = pte::access_faults(ptes[vpn as usize], true, wp_bit(wrprotect, vpn));
        if was == now {
            return;
        }
        let seg = self.segment_of(vpn);
        let except = Except {
            vpn,
            candidate: !was && pte::present(ptes[vpn as usize]),
        };
        self.sync_segment(seg, Some(except), ptes, pmd_young);
        self.faulting[w] ^= bit;
        let d = if now { 1 } else { -1 };
        let g = w / GROUP_WORDS;
        self.group_count[g] = self.group_count[g].wrapping_add_signed(d as i16);
        self.fen_add(g / BLOCK_GROUPS, d);
        let th = &mut self.threads[self.segs[seg].thread as usize];
        th.faulting = th.faulting.wrapping_add_signed(d);
    }

    fn segment_of(&self, vpn: u32) -> usize {
        let w = vpn as usize / SEG_PAGES;
        let Some(word_seg) = &self.word_seg else {
            return w;
        };
        let mut s = word_seg[w] as usize;
        while s + 1 < self.segs.len() && self.segs[s + 1].start <= vpn {
            s += 1;
        }
        s
    }

    /// Prefetch what thread `t`'s next faulting draw will most likely read (no effect on
    /// results): the page [`Self::faulting_page`] would draw now, with a copy of the
    /// thread's random stream, and what a fault there reads. Called when a chunk ends in
    /// a fault, before the chunk's writes are waited out, so that the misses complete
    /// while other tasks run; the draw itself comes after, and hits unless something
    /// drew from the stream or changed the faulting pages meanwhile.
    pub fn prefetch_next_fault(&self, t: usize, ptes: &[u32]) {
        let f = self.faulting_in(t);
        if f == 0 {
            return;
        }
        let j = self.threads[t].rng.clone().random_range(0..f);
        self.prefetch_fault(self.faulting_page_at(t, j), ptes);
    }

    /// Prefetch what a fault at `vpn` will read, all at once (no effect on results): its
    /// segment, which the fault's PTE change brings up to date ([`Self::note`]), and the
    /// segment's PTEs, the faulting one among them. Read one after the other, the fault
    /// would wait for each in turn. (Where segments are not the bitmap's words, finding
    /// the segment is a search of its own: only the PTEs are prefetched.)
    #[inline]
    pub fn prefetch_fault(&self, vpn: u32, ptes: &[u32]) {
        if self.word_seg.is_none() {
            if let Some(seg) = self.segs.get(vpn as usize / SEG_PAGES) {
                crate::mm::prefetch(seg);
            }
        }
        prefetch_pte_lines(ptes, vpn as usize & !(SEG_PAGES - 1), u64::MAX);
    }

    /// Thread `t` made `k` more writes.
    pub fn commit(&mut self, t: usize, k: u64) {
        self.threads[t].drawn += k;
    }

    /// Bring the bits of pages `[lo, hi)` up to date with their threads' draws.
    pub fn sync(&mut self, lo: u32, hi: u32, ptes: &mut [u32], pmd_young: &mut [u64]) {
        if let Some((base, n)) = self.text {
            let drawn = if lo < base + n && hi > base {
                self.threads.iter().map(|t| t.drawn).sum::<u64>()
            } else {
                0
            };
            if drawn > self.text_sync {
                // Every write ran every text page: all of them were fetched since.
                self.text_sync = drawn;
                for v in base..base + n {
                    if pte::present(ptes[v as usize]) {
                        ptes[v as usize] |= pte::YOUNG;
                        let b = v as usize / PTRS_PER_PTE;
                        pmd_young[b / 64] |= 1 << (b % 64);
                    }
                }
            }
        }
        let hi = hi.min(self.pages);
        if lo >= hi {
            return;
        }
        let mut s = self.segment_of(lo);
        while s < self.segs.len() && self.segs[s].start < hi {
            self.sync_segment(s, None, ptes, pmd_young);
            s += 1;
        }
    }

    /// Bring segment `s` up to date: each writable present PTE of it is hit by one of the
    /// `k` draws since its last update with probability `1 - (1 - 1/n)^k`, independently;
    /// a hit sets it young and dirty and the PMD's accessed bit. The candidates are the
    /// segment's pages whose faulting bit is clear (`except` overrides one page's): a
    /// faulting page's draws are the faulting ones. The hits are found by geometric skips
    /// over the candidates, O(1 + hits), or where most are hit by a draw per candidate.
    fn sync_segment(
        &mut self,
        s: usize,
        except: Option<Except>,
        ptes: &mut [u32],
        pmd_young: &mut [u64],
    ) {
        let seg = self.segs[s];
        let th = &mut self.threads[seg.thread as usize];
        let k = th.drawn - seg.sync;
        if k == 0 {
            return;
        }
        self.segs[s].sync = th.drawn;
        let lo = seg.start;
        // Where segment `s` is word `s`, the next one starts at the next word: no need
        // to read it (a line of its own one time in four).
        let next = if self.word_seg.is_none() {
            ((s + 1) * SEG_PAGES).min(self.pages as usize) as u32
        } else {
            self.segs.get(s + 1).map_or(self.pages, |n| n.start)
        };
        debug_assert_eq!(next, self.segs.get(s + 1).map_or(self.pages, |n| n.start));
        let hi = next.min(th.hi);
        // The segment lies in one word of the bitmap: its pages are bits lo % 64 .. hi - lo.
        let base = lo & !(SEG_PAGES as u32 - 1);
        let width = hi - lo;
        let mask = if width == 64 {
            u64::MAX
        } else {
            ((1u64 << width) - 1) << (lo - base)
        };
        let mut cand = !self.faulting[lo as usize / SEG_PAGES] & mask;
        if let Some(e) = except {
            if (lo..hi).contains(&e.vpn) {
                let bit = 1u64 << (e.vpn - base);
                cand = if e.candidate { cand | bit } else { cand & !bit };
            }
        }
        if cand == 0 {
            return;
        }
        // The candidates' PTE lines, fetched while the hits are drawn.
        prefetch_pte_lines(ptes, base as usize, cand);
        // ln(1 - p_hit) = k ln(1 - 1/n).
        let log_miss = k as f64 * th.log_miss;
        let p_hit = -log_miss.exp_m1();
        let mut hits = 0u64;
        if p_hit > DENSE_HIT {
            // Most candidates are hit: one uniform draw each beats a logarithm per hit.
            let threshold = (p_hit * 2f64.powi(64)) as u64; // saturates at p_hit = 1
            let mut c = cand;
            while c != 0 {
                let b = c & c.wrapping_neg();
                if th.rng.random::<u64>() < threshold || p_hit >= 1.0 {
                    hits |= b;
                }
                c &= c - 1;
            }
        } else {
            let mut c = cand;
            loop {
                let skip = geometric(&mut th.rng, log_miss);
                if skip >= c.count_ones() as u64 {
                    break;
                }
                for _ in 0..skip {
                    c &= c - 1;
                }
                hits |= c & c.wrapping_neg();
                c &= c - 1;
            }
        }
        if hits == 0 {
            return;
        }
        let mut h = hits;
        while h != 0 {
            let v = (base + h.trailing_zeros()) as usize;
            ptes[v] |= pte::YOUNG | pte::DIRTY;
            h &= h - 1;
        }
        let b = lo as usize / PTRS_PER_PTE;
        pmd_young[b / 64] |= 1 << (b % 64);
    }

    /// Thread `t`'s next faulting draw: how many non-faulting draws come first (None: no
    /// page of its span faults now), from the geometric distribution of success `F/n`.
    pub fn draws_before_fault(&mut self, t: usize) -> Option<u64> {
        let f = self.faulting_in(t);
        if f == 0 {
            return None;
        }
        let th = &mut self.threads[t];
        let n = (th.hi - th.lo) as f64;
        Some(geometric(&mut th.rng, (-(f as f64) / n).max(-1.0).ln_1p()))
    }

    /// A page of thread `t`'s span that faults, each equally likely (None if none does).
    pub fn faulting_page(&mut self, t: usize) -> Option<u32> {
        let f = self.faulting_in(t);
        if f == 0 {
            return None;
        }
        let j = self.threads[t].rng.random_range(0..f);
        Some(self.faulting_page_at(t, j))
    }

    /// The `j`-th faulting page of thread `t`'s span (j < its faulting pages).
    fn faulting_page_at(&self, t: usize, j: u64) -> u32 {
        self.select(self.rank(self.threads[t].lo) + j)
    }

    /// Whether the faulting bitmap matches the PTEs (mm/check.rs).
    pub fn check(&self, ptes: &[u32], wrprotect: &[u64]) -> std::result::Result<(), String> {
        for vpn in 0..self.pages {
            let bit = self.faulting[vpn as usize / 64] & (1 << (vpn % 64)) != 0;
            if bit != pte::access_faults(ptes[vpn as usize], true, wp_bit(wrprotect, vpn)) {
                return Err(format!(
                    "sampled area: page {vpn}'s faulting bit is {bit}, its PTE {:#x}",
                    ptes[vpn as usize]
                ));
            }
        }
        let mut below = 0u64;
        for (g, line) in self.faulting.chunks(GROUP_WORDS).enumerate() {
            let count = line.iter().map(|w| w.count_ones() as u64).sum::<u64>();
            if self.group_count[g] as u64 != count {
                return Err(format!(
                    "sampled area: group {g} counts {} faulting pages, the bitmap {count}",
                    self.group_count[g]
                ));
            }
            if g % BLOCK_GROUPS == 0 && self.fen_prefix(g / BLOCK_GROUPS) != below {
                return Err(format!(
                    "sampled area: the Fenwick tree counts {} faulting pages before block {}, \
                     the bitmap {below}",
                    self.fen_prefix(g / BLOCK_GROUPS),
                    g / BLOCK_GROUPS
                ));
            }
            below += count;
        }
        for (t, th) in self.threads.iter().enumerate() {
            let scan = (th.lo..th.hi)
                .filter(|&v| self.faulting[v as usize / 64] & (1 << (v % 64)) != 0)
                .count() as u64;
            if th.faulting != scan {
                return Err(format!(
                    "sampled area: thread {t} counts {} faulting pages in its span, \
                     the bitmap {scan}",
                    th.faulting
                ));
            }
        }
        Ok(())
    }
}

/// Prefetch the lines of a bitmap word's PTEs (`base`, a multiple of 64, and the 64 after
/// it; 16 PTEs a line) that hold a page of `mask` (no effect on results).
#[inline]
fn prefetch_pte_lines(ptes: &[u32], base: usize, mask: u64) {
    for q in 0..SEG_PAGES / 16 {
        if (mask >> (16 * q)) & 0xffff != 0 {
            if let Some(p) = ptes.get(base + 16 * q) {
                crate::mm::prefetch(p);
            }
        }
    }
}

/// A draw of the geometric distribution (failures before the first success) whose
/// failure probability has logarithm `log_fail` (<= 0), by inversion: floor(ln U /
/// log_fail) for U uniform in (0, 1]. Certain success (`log_fail` = -inf) gives 0; a
/// failure probability that rounds to 1 (`log_fail` = 0) gives u64::MAX.
#[inline]
fn geometric(rng: &mut Rng, log_fail: f64) -> u64 {
    if log_fail == 0.0 {
        return u64::MAX;
    }
    let u: f64 = 1.0 - rng.random::<f64>();
    let g = u.ln() / log_fail;
    if g.is_nan() {
        return 0;
    }
    g as u64 // saturates: +inf and huge values become u64::MAX
}

#[inline]
fn wp_bit(wrprotect: &[u64], vpn: u32) -> bool {
    wrprotect
        .get(vpn as usize / 64)
        .is_some_and(|w| w & (1 << (vpn % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng::stream;
    use proptest::prelude::*;

    /// An area of `pages` pages, one thread over all of it, its PTEs as `present` says
    /// (frame = page number + 1; never young).
    fn area(pages: u32, present: impl Fn(u32) -> bool) -> (SampledArea, Vec<u32>, Vec<u64>) {
        let ptes: Vec<u32> = (0..pages)
            .map(|v| {
                if present(v) {
                    pte::mk_present(v + 1, false, false)
                } else {
                    0
                }
            })
            .collect();
        let pmd = vec![0u64; (pages as usize).div_ceil(PTRS_PER_PTE).div_ceil(64)];
        let sa = SampledArea::new(pages, vec![((0, pages), stream(7, 1))], None, &ptes, &[]);
        (sa, ptes, pmd)
    }

    /// Present young PTEs (a swap entry's bit 30 is not YOUNG).
    fn young(ptes: &[u32]) -> usize {
        ptes.iter()
            .filter(|&&v| pte::present(v) && v & pte::YOUNG != 0)
            .count()
    }

    proptest! {
        /// rank and select against a count and a scan of the bitmap, over areas of up to
        /// ten blocks (a block is 4,096 pages), sparse to dense.
        #[test]
        fn rank_and_select_agree_with_a_scan(
            n in 1u32..40_000,
            density in 0.0f64..1.0,
            seed in any::<u64>(),
        ) {
            let mut rng = stream(seed, 0);
            let bits: Vec<bool> = (0..n).map(|_| rng.random::<f64>() < density).collect();
            let (sa, _, _) = area(n, |v| !bits[v as usize]);
            let faulting: Vec<u32> = (0..n).filter(|&v| bits[v as usize]).collect();
            let mut below = 0u64;
            for x in 0..=n {
                prop_assert_eq!(sa.rank(x), below);
                if x < n && bits[x as usize] {
                    below += 1;
                }
            }
            for (j, &v) in faulting.iter().enumerate() {
                prop_assert_eq!(sa.select(j as u64), v);
            }
        }

        /// Three threads' spans over an area; PTEs mapped and unmapped one by one through
        /// `note`: each thread's faulting count, rank and select follow the bitmap, and a
        /// thread's faulting page is in its span.
        #[test]
        fn faulting_counts_follow_the_ptes(
            n in 3u32..12_000,
            cuts in (0.0f64..1.0, 0.0f64..1.0),
            flips in proptest::collection::vec((0.0f64..1.0, any::<bool>()), 0..200),
        ) {
            let (a, b) = (cuts.0.min(cuts.1), cuts.0.max(cuts.1));
            let c1 = ((n as f64 * a) as u32).clamp(1, n - 2);
            let c2 = ((n as f64 * b) as u32).clamp(c1 + 1, n - 1);
            let spans = vec![
                ((0, c1), stream(7, 1)),
                ((c1, c2), stream(7, 2)),
                ((c2, n), stream(7, 3)),
            ];
            let mut ptes: Vec<u32> = (0..n)
                .map(|v| if v % 3 == 0 { 0 } else { pte::mk_present(v + 1, false, false) })
                .collect();
            let mut pmd = vec![0u64; (n as usize).div_ceil(PTRS_PER_PTE).div_ceil(64)];
            let mut sa = SampledArea::new(n, spans, None, &ptes, &[]);
            for (x, map) in flips {
                let v = ((x * n as f64) as u32).min(n - 1);
                ptes[v as usize] = if map {
                    pte::mk_present(v + 1, false, true)
                } else {
                    pte::mk_swap(v)
                };
                sa.note(v, &mut ptes, &[], &mut pmd);
                prop_assert_eq!(sa.check(&ptes, &[]), Ok(()));
            }
            for t in 0..3 {
                let (lo, hi) = (sa.threads[t].lo, sa.threads[t].hi);
                let scan = (lo..hi).filter(|&v| !pte::present(ptes[v as usize])).count() as u64;
                prop_assert_eq!(sa.faulting_in(t), scan);
                prop_assert_eq!(sa.rank(hi) - sa.rank(lo), scan);
                if let Some(v) = sa.faulting_page(t) {
                    prop_assert!((lo..hi).contains(&v) && !pte::present(ptes[v as usize]));
                } else {
                    prop_assert_eq!(scan, 0);
                }
            }
        }
    }

    #[test]
    fn the_estimate_per_page_is_what_the_state_allocates() {
        // Two threads whose spans meet inside a word (so each word has its first segment
        // recorded, the estimate's worst case), over 64 blocks: the tables' own sizes.
        let pages = 64 * 4096;
        let ptes = vec![0u32; pages as usize];
        let cut = pages / 2 + 5;
        let spans = vec![((0, cut), stream(7, 1)), ((cut, pages), stream(7, 2))];
        let sa = SampledArea::new(pages, spans, None, &ptes, &[]);
        let word_seg = sa.word_seg.as_ref().expect("a span starts inside a word");
        let bytes = sa.faulting.len() * 8
            + sa.group_count.len() * 2
            + sa.fen.len() * 4
            + sa.segs.len() * std::mem::size_of::<Segment>()
            + word_seg.len() * 4;
        let per_page = bytes as f64 / pages as f64;
        assert!(
            (per_page - SAMPLED_BYTES_PER_PAGE).abs() < 0.001 * SAMPLED_BYTES_PER_PAGE,
            "the tables take {per_page} bytes a page, the estimate says {SAMPLED_BYTES_PER_PAGE}"
        );
    }

    #[test]
    fn check_finds_counts_that_disagree_with_the_bitmap() {
        // Three blocks, every third page absent: each count matches until one is changed.
        let (mut sa, ptes, _) = area(3 * 4096, |v| v % 3 != 0);
        assert_eq!(sa.check(&ptes, &[]), Ok(()));
        sa.group_count[9] += 1;
        let e = sa.check(&ptes, &[]).unwrap_err();
        assert!(e.contains("group 9 counts"), "{e}");
        sa.group_count[9] -= 1;
        // Block 1's Fenwick entry (index 2 covers blocks 0 and 1): block 2's prefix is off.
        sa.fen[2] += 1;
        let e = sa.check(&ptes, &[]).unwrap_err();
        assert!(e.contains("before block 2"), "{e}");
        sa.fen[2] -= 1;
        sa.faulting[0] ^= 1 << 1;
        let e = sa.check(&ptes, &[]).unwrap_err();
        assert!(e.contains("page 1's faulting bit"), "{e}");
    }

    #[test]
    fn a_sync_after_k_draws_makes_each_writable_page_young_with_1_minus_q_to_the_k() {
        // 4096 pages, every other one present: after k draws each present page is young
        // with p = 1 - (1 - 1/4096)^k, independently, so the young count is binomial
        // (2048, p): within 5 standard deviations of 2048 p. No absent page is touched; a
        // block's PMD bit is set exactly when one of its pages became young.
        for k in [100u64, 1000, 4096, 20_000] {
            let (mut sa, mut ptes, mut pmd) = area(4096, |v| v % 2 == 0);
            sa.commit(0, k);
            sa.sync(0, 4096, &mut ptes, &mut pmd);
            let p = 1.0 - (1.0 - 1.0 / 4096.0f64).powf(k as f64);
            let (mean, sd) = (2048.0 * p, (2048.0 * p * (1.0 - p)).sqrt());
            let got = young(&ptes) as f64;
            assert!(
                (got - mean).abs() <= 5.0 * sd + 1.0,
                "k {k}: {got} young, expected {mean:.0} +- {sd:.0}"
            );
            assert!(ptes.iter().skip(1).step_by(2).all(|&v| v == 0));
            for b in 0..8 {
                let any = ptes[b * 512..(b + 1) * 512]
                    .iter()
                    .any(|&v| v & pte::YOUNG != 0);
                assert_eq!(pmd[0] & (1 << b) != 0, any, "k {k} block {b}");
            }
            // Nothing more drawn: a second sync changes nothing.
            let before = ptes.clone();
            sa.sync(0, 4096, &mut ptes, &mut pmd);
            assert_eq!(ptes, before);
        }
    }

    #[test]
    fn a_page_mapped_after_the_draws_gets_none_of_them() {
        // A million draws over 1024 pages leave every writable page young (p = 1 - 1e-425).
        // Page 5 is mapped only after them (a fault): none of those draws may be its.
        // Page 9, writable while they were drawn, is unmapped by reclaim before anyone
        // looks: its bit goes with its PTE.
        let (mut sa, mut ptes, mut pmd) = area(1024, |v| v != 5);
        sa.threads[0].drawn = 1_000_000;
        ptes[5] = pte::mk_present(6, false, true);
        sa.note(5, &mut ptes, &[], &mut pmd);
        ptes[9] = pte::mk_swap(3);
        sa.note(9, &mut ptes, &[], &mut pmd);
        sa.sync(0, 1024, &mut ptes, &mut pmd);
        assert_eq!(ptes[5] & pte::YOUNG, 0);
        assert_eq!(ptes[9], pte::mk_swap(3));
        assert_eq!(young(&ptes), 1022);
        assert_eq!(sa.faulting_in(0), 1);
        sa.check(&ptes, &[]).unwrap();
    }

    #[test]
    fn the_page_a_note_changes_is_drawn_as_it_stood_before() {
        // 128 pages, 94 and 104 not present; a million draws make every writable page
        // young (p = 1 - 1e-3400) at the first look. That look is a note, which brings
        // the noted page's segment (pages 64..128) up to date:
        // - reclaim unmaps page 73 (now a swap entry): its swap PTE takes no bit, the
        //   absent pages none, every other page of the segment its bit;
        // - fork write-protects page 67 while present: it was writable while the draws
        //   were made, so it is young like the others.
        let swap = pte::mk_swap(3);
        for (vpn, wp) in [(73u32, false), (67, true)] {
            let (_, mut ptes, mut pmd) = area(128, |v| v != 94 && v != 104);
            let spans = vec![((0, 128), stream(7, 1))];
            let mut sa = SampledArea::new(128, spans, None, &ptes, &[]);
            sa.threads[0].drawn = 1_000_000;
            let mut wpbits = vec![0u64; 2];
            if wp {
                wpbits[1] = 1 << (vpn - 64);
            } else {
                ptes[vpn as usize] = swap;
            }
            sa.note(vpn, &mut ptes, &wpbits, &mut pmd);
            assert_eq!((ptes[94], ptes[104]), (0, 0));
            assert_eq!(young(&ptes[..64]), 0, "another segment: not looked at");
            if wp {
                assert_eq!(young(&ptes[64..]), 62, "all present pages young");
                assert_ne!(ptes[67] & pte::YOUNG, 0);
            } else {
                assert_eq!(ptes[73], swap);
                assert_eq!(young(&ptes[64..]), 61, "all present pages but 73 young");
            }
            assert_eq!(sa.faulting_in(0), 3);
            sa.check(&ptes, &wpbits).unwrap();
        }
    }

    #[test]
    fn a_write_protected_page_faults_and_is_never_made_young() {
        // Copy-on-write after fork: page 3 present but write-protected faults, and no
        // sync marks it; once do_wp_page makes it writable it is drawn like the others.
        let (_, mut ptes, mut pmd) = area(64, |_| true);
        let mut wp = vec![1u64 << 3];
        let mut sa = SampledArea::new(64, vec![((0, 64), stream(7, 1))], None, &ptes, &wp);
        assert_eq!((sa.faulting_in(0), sa.faulting_page(0)), (1, Some(3)));
        sa.threads[0].drawn = 100_000;
        sa.sync(0, 64, &mut ptes, &mut pmd);
        assert_eq!(ptes[3] & pte::YOUNG, 0);
        assert_eq!(young(&ptes), 63);
        wp[0] = 0;
        sa.note(3, &mut ptes, &wp, &mut pmd);
        assert_eq!(sa.faulting_in(0), 0);
        sa.threads[0].drawn += 100_000;
        sa.sync(0, 64, &mut ptes, &mut pmd);
        assert_ne!(ptes[3] & pte::YOUNG, 0);
    }

    #[test]
    fn faulting_draws_come_at_rate_f_over_n_on_uniform_faulting_pages() {
        // 1000 pages, 100 of them (every tenth) faulting: the non-faulting draws before
        // the next faulting one are geometric with success 0.1, mean 9; the faulting page
        // is uniform over the 100 (each chosen 20000/100 = 200 times, sd 14).
        let (mut sa, _, _) = area(1000, |v| v % 10 != 0);
        let draws: u64 = (0..20_000).map(|_| sa.draws_before_fault(0).unwrap()).sum();
        let mean = draws as f64 / 20_000.0;
        // sd of the mean: sqrt(0.9) / 0.1 / sqrt(20000) = 0.067
        assert!((mean - 9.0).abs() < 0.35, "mean {mean}");
        let mut count = vec![0u32; 1000];
        for _ in 0..20_000 {
            count[sa.faulting_page(0).unwrap() as usize] += 1;
        }
        assert!(count
            .iter()
            .enumerate()
            .all(|(v, &c)| (v % 10 == 0) == (c > 0)));
        assert!(
            count.iter().step_by(10).all(|&c| (130..=270).contains(&c)),
            "{count:?}"
        );
        // A second thread's span, 1000..2000, the same shape: the same law (its n is its
        // span's 1000 pages, not where the span lies).
        let ptes: Vec<u32> = (0..2000)
            .map(|v| {
                if v % 10 == 0 {
                    0
                } else {
                    pte::mk_present(v + 1, false, false)
                }
            })
            .collect();
        let spans = vec![((0, 1000), stream(2, 1)), ((1000, 2000), stream(2, 2))];
        let mut two = SampledArea::new(2000, spans, None, &ptes, &[]);
        let draws: u64 = (0..20_000)
            .map(|_| two.draws_before_fault(1).unwrap())
            .sum();
        let mean = draws as f64 / 20_000.0;
        assert!((mean - 9.0).abs() < 0.35, "second thread: mean {mean}");
        assert!((0..1000).all(|_| two.faulting_page(1).unwrap() >= 1000));
        // Nothing faults: no faulting draw.
        let (mut none, _, _) = area(100, |_| true);
        assert_eq!(none.draws_before_fault(0), None);
        assert_eq!(none.faulting_page(0), None);
    }

    #[test]
    fn segments_follow_spans_and_words() {
        // Two threads over 1000 pages: spans [0, 500) and [500, 1000) cut at every 64th
        // page: [0, 64), .., [448, 500), [500, 512), [512, 576), .., [960, 1000); each
        // word's first segment is the one holding its first page. Thread 1's draws touch
        // only its pages.
        let ptes: Vec<u32> = (0..1000)
            .map(|v| pte::mk_present(v + 1, false, false))
            .collect();
        let mut ptes = ptes;
        let mut pmd = vec![0u64];
        let spans = vec![((0, 500), stream(1, 1)), ((500, 1000), stream(1, 2))];
        let mut sa = SampledArea::new(1000, spans, None, &ptes, &[]);
        let starts: Vec<u32> = (0..8)
            .map(|w| w * 64)
            .chain([500])
            .chain((8..16).map(|w| w * 64))
            .collect();
        let threads = [vec![0; 8], vec![1; 9]].concat();
        assert_eq!(sa.segs.iter().map(|g| g.start).collect::<Vec<_>>(), starts);
        assert_eq!(
            sa.segs.iter().map(|g| g.thread).collect::<Vec<_>>(),
            threads
        );
        let first: Vec<u32> = (0..8).chain(9..17).collect();
        assert_eq!(sa.word_seg, Some(first));
        // Spans on 64-page boundaries: segment w is word w, no table.
        let spans = vec![((0, 512), stream(1, 1)), ((512, 1000), stream(1, 2))];
        let aligned = SampledArea::new(1000, spans, None, &ptes, &[]);
        assert_eq!(aligned.word_seg, None);
        assert_eq!(aligned.segs.len(), 16);
        assert!((0..1000).all(|v| aligned.segment_of(v) == v as usize / 64));
        for v in 0..1000 {
            let s = sa.segment_of(v);
            let end = sa.segs.get(s + 1).map_or(1000, |n| n.start);
            assert!(
                (sa.segs[s].start..end).contains(&v),
                "page {v} in segment {s}"
            );
        }
        sa.threads[1].drawn = 1_000_000;
        sa.sync(0, 1000, &mut ptes, &mut pmd);
        assert_eq!(young(&ptes[..500]), 0);
        assert_eq!(young(&ptes[500..]), 500);
        assert_eq!(pmd[0], 0b11);
    }

    #[test]
    fn every_write_runs_the_text_so_one_write_makes_all_of_it_young() {
        // 512 area pages and a 3-page text at 600..603 (page 601 reclaimed): no write
        // since the last look leaves the text as it is; one write by either thread makes
        // each present text page young and its PMD accessed, whatever page is read.
        let mut ptes: Vec<u32> = (0..603)
            .map(|v| pte::mk_present(v + 1, false, false))
            .collect();
        ptes[601] = 0;
        let mut pmd = vec![0u64];
        let spans = vec![((0, 256), stream(1, 1)), ((256, 512), stream(1, 2))];
        let mut sa = SampledArea::new(512, spans, Some((600, 3)), &ptes, &[]);
        sa.sync(600, 601, &mut ptes, &mut pmd);
        assert_eq!(young(&ptes), 0);
        sa.commit(1, 1);
        sa.sync(602, 603, &mut ptes, &mut pmd);
        assert_eq!(
            (ptes[600] & pte::YOUNG, ptes[601], ptes[602] & pte::YOUNG),
            (pte::YOUNG, 0, pte::YOUNG)
        );
        assert_eq!(pmd[0], 0b10);
        // Cleared by a reader, the text stays old until the next write.
        ptes[600] &= !pte::YOUNG;
        sa.sync(600, 601, &mut ptes, &mut pmd);
        assert_eq!(ptes[600] & pte::YOUNG, 0);
        sa.commit(0, 1);
        sa.sync(600, 601, &mut ptes, &mut pmd);
        assert_eq!(ptes[600] & pte::YOUNG, pte::YOUNG);
    }

    #[test]
    fn geometric_draws_at_the_edges() {
        let mut rng = stream(3, 3);
        assert_eq!(geometric(&mut rng, 0.0), u64::MAX);
        assert_eq!(geometric(&mut rng, f64::NEG_INFINITY), 0);
        // Success 1/2: P(0) = 1/2, P(1) = 1/4.
        let d: Vec<u64> = (0..40_000)
            .map(|_| geometric(&mut rng, 0.5f64.ln()))
            .collect();
        let zeros = d.iter().filter(|&&g| g == 0).count() as f64 / 40_000.0;
        let ones = d.iter().filter(|&&g| g == 1).count() as f64 / 40_000.0;
        assert!(
            (zeros - 0.5).abs() < 0.0125 && (ones - 0.25).abs() < 0.011,
            "{zeros} {ones}"
        );
    }
}
