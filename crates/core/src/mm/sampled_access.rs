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
//! piece of its span (a *segment*: the span cut at the page-table blocks' boundaries)
//! remembers the count at which its bits were last brought up to date. Bringing a segment
//! up to date after `k` more draws sets each of its present, writable PTEs young (and
//! dirty) with probability `1 - (1 - 1/n)^k`, `n` the span's pages: the exact probability
//! that one of `k` uniform draws hit the page. The pages are drawn independently of one
//! another; the kernel-visible consequences of that and of the other simplifications are
//! argued in docs/model.md ("Sampled access"):
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
//!   tree over 64-page words of a faulting bitmap: O(log n)). It commits at most `n/1024`
//!   draws at once (see `usemem.rs`), and draws again with the `F` of that moment, so a
//!   page that starts to fault in between is seen at most `n/1024` draws late: in a steady
//!   state that makes about 1/2048 of the faulting writes late by half a chunk.
//! - Time: a chunk's draws are committed when it starts, as a per-access thread runs up to
//!   a quantum ahead of the others; a look in the middle of a chunk sees all of its draws.
//! - Text: every write runs the process's text, so its present PTEs are young at a look
//!   if any write was made since the last; the thread fetches the text (faulting back a
//!   page reclaim took) at each chunk's first write, and with a text a chunk is one
//!   engine quantum of writes at most.
//!
//! The state costs about 0.23 bytes per page of a sampled area (a faulting bit, a Fenwick
//! counter per 64 pages, a segment per 512 pages) and nothing for other areas.

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
/// (1/8), a Fenwick counter per 64 pages (4/64), and per 512 pages a segment (start,
/// thread, sync count: 16) and a block's first segment (4).
pub const SAMPLED_BYTES_PER_PAGE: f64 = 1.0 / 8.0 + 4.0 / 64.0 + 20.0 / 512.0;

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
    /// ln(1 - 1/n), n the span's pages: the log-probability that one draw misses a page.
    log_miss: f64,
    pub rng: Rng,
}

/// The sampled state of one process's area (pages `0..pages`).
pub struct SampledArea {
    pages: u32,
    pub threads: Vec<SampledThread>,
    /// Segments: segment `i` covers `[seg_start[i], seg_start[i + 1])` (the last to
    /// `pages`), all of it in thread `seg_thread[i]`'s span and one page-table block.
    seg_start: Vec<u32>,
    seg_thread: Vec<u32>,
    /// The thread's `drawn` when the segment's bits were last brought up to date.
    seg_sync: Vec<u64>,
    /// The first segment of each page-table block.
    block_seg: Vec<u32>,
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
    /// A Fenwick tree (1-based) over `faulting`'s words: their set bits.
    fen: Vec<u32>,
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
        let mut seg_start = Vec::new();
        let mut seg_thread = Vec::new();
        let mut block_seg = Vec::new();
        let mut threads = Vec::new();
        for (t, ((lo, hi), rng)) in spans.into_iter().enumerate() {
            let n = (hi - lo).max(1) as f64;
            threads.push(SampledThread {
                lo,
                hi,
                drawn: 0,
                log_miss: (-1.0 / n).ln_1p(),
                rng,
            });
            let mut a = lo;
            while a < hi {
                let block_end = ((a as usize / PTRS_PER_PTE + 1) * PTRS_PER_PTE) as u32;
                seg_start.push(a);
                seg_thread.push(t as u32);
                a = block_end.min(hi);
            }
        }
        let blocks = (pages as usize).div_ceil(PTRS_PER_PTE);
        let mut s = 0usize;
        for b in 0..blocks {
            while s + 1 < seg_start.len() && seg_start[s + 1] as usize <= b * PTRS_PER_PTE {
                s += 1;
            }
            block_seg.push(s as u32);
        }
        let words = (pages as usize).div_ceil(64);
        let mut faulting = vec![0u64; words];
        for vpn in 0..pages {
            if Self::faults(ptes[vpn as usize], wp_bit(wrprotect, vpn)) {
                faulting[vpn as usize / 64] |= 1 << (vpn % 64);
            }
        }
        let mut area = SampledArea {
            pages,
            threads,
            seg_sync: vec![0; seg_start.len()],
            seg_start,
            seg_thread,
            block_seg,
            text,
            text_sync: 0,
            writing: 0,
            faulting,
            fen: vec![0; words + 1],
        };
        for w in 0..words {
            area.fen_add(w, area.faulting[w].count_ones() as i64);
        }
        area
    }

    fn fen_add(&mut self, word: usize, d: i64) {
        let mut i = word + 1;
        while i < self.fen.len() {
            self.fen[i] = (self.fen[i] as i64 + d) as u32;
            i += i & i.wrapping_neg();
        }
    }

    /// Faulting pages in words `0..word`.
    fn fen_prefix(&self, word: usize) -> u64 {
        let (mut i, mut sum) = (word, 0u64);
        while i > 0 {
            sum += self.fen[i] as u64;
            i &= i - 1;
        }
        sum
    }

    /// Faulting pages in `[0, x)`.
    pub fn rank(&self, x: u32) -> u64 {
        let (w, b) = (x as usize / 64, x % 64);
        let part = if b == 0 {
            0
        } else {
            (self.faulting[w] & ((1u64 << b) - 1)).count_ones() as u64
        };
        self.fen_prefix(w) + part
    }

    /// Faulting pages in thread `t`'s span.
    pub fn faulting_in(&self, t: usize) -> u64 {
        let th = &self.threads[t];
        self.rank(th.hi) - self.rank(th.lo)
    }

    /// The faulting page whose rank (faulting pages before it) is `r`.
    pub fn select(&self, r: u64) -> u32 {
        // The last word w with fen_prefix(w) <= r, by the Fenwick tree's binary descent.
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
        // Bit `left` (0-based) of word `pos`.
        let mut w = self.faulting[pos];
        for _ in 0..left {
            w &= w - 1;
        }
        pos as u32 * 64 + w.trailing_zeros()
    }

    /// Is a write to `vpn` a fault, by its PTE and write protection?
    #[inline]
    fn faults(v: u32, wrprotected: bool) -> bool {
        !pte::present(v) || wrprotected
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
        let now = Self::faults(ptes[vpn as usize], wp_bit(wrprotect, vpn));
        if was == now {
            return;
        }
        let seg = self.segment_of(vpn);
        let except = Except {
            vpn,
            candidate: !was && pte::present(ptes[vpn as usize]),
        };
        self.sync_segment(seg, Some(except), ptes, wrprotect, pmd_young);
        self.faulting[w] ^= bit;
        self.fen_add(w, if now { 1 } else { -1 });
    }

    fn segment_of(&self, vpn: u32) -> usize {
        let mut s = self.block_seg[vpn as usize / PTRS_PER_PTE] as usize;
        while s + 1 < self.seg_start.len() && self.seg_start[s + 1] <= vpn {
            s += 1;
        }
        s
    }

    /// Thread `t` made `k` more writes.
    pub fn commit(&mut self, t: usize, k: u64) {
        self.threads[t].drawn += k;
    }

    /// Bring the bits of pages `[lo, hi)` up to date with their threads' draws.
    pub fn sync(
        &mut self,
        lo: u32,
        hi: u32,
        ptes: &mut [u32],
        wrprotect: &[u64],
        pmd_young: &mut [u64],
    ) {
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
        while s < self.seg_start.len() && self.seg_start[s] < hi {
            self.sync_segment(s, None, ptes, wrprotect, pmd_young);
            s += 1;
        }
    }

    /// Bring segment `s` up to date: each writable present PTE of it is hit by one of the
    /// `k` draws since its last update with probability `1 - (1 - 1/n)^k`, independently;
    /// a hit sets it young and dirty and the PMD's accessed bit. The hits are found by
    /// geometric skips over the segment's pages (a skip landing on a faulting page is
    /// dropped: that page's draws are the faulting ones), O(1 + hits), or where most
    /// pages are hit by a draw per page.
    fn sync_segment(
        &mut self,
        s: usize,
        except: Option<Except>,
        ptes: &mut [u32],
        wrprotect: &[u64],
        pmd_young: &mut [u64],
    ) {
        let t = self.seg_thread[s] as usize;
        let th = &mut self.threads[t];
        let k = th.drawn - self.seg_sync[s];
        if k == 0 {
            return;
        }
        self.seg_sync[s] = th.drawn;
        // ln(1 - p_hit) = k ln(1 - 1/n).
        let log_miss = k as f64 * th.log_miss;
        let lo = self.seg_start[s];
        let hi = self
            .seg_start
            .get(s + 1)
            .copied()
            .unwrap_or(self.pages)
            .min(th.hi);
        let mut young = false;
        let mut hit = |v: u32| {
            let candidate = match except {
                Some(e) if e.vpn == v => e.candidate,
                _ => !Self::faults(ptes[v as usize], wp_bit(wrprotect, v)),
            };
            if candidate {
                ptes[v as usize] |= pte::YOUNG | pte::DIRTY;
                young = true;
            }
        };
        let p_hit = -log_miss.exp_m1();
        if p_hit > DENSE_HIT {
            // Most pages are hit: one uniform draw per page beats a logarithm per hit.
            let threshold = (p_hit * 2f64.powi(64)) as u64; // saturates at p_hit = 1
            for v in lo..hi {
                if th.rng.random::<u64>() < threshold || p_hit >= 1.0 {
                    hit(v);
                }
            }
        } else {
            let mut vpn = lo as u64;
            loop {
                vpn = vpn.saturating_add(geometric(&mut th.rng, log_miss));
                if vpn >= hi as u64 {
                    break;
                }
                hit(vpn as u32);
                vpn += 1;
            }
        }
        if young {
            let b = lo as usize / PTRS_PER_PTE;
            pmd_young[b / 64] |= 1 << (b % 64);
        }
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
        let lo = self.threads[t].lo;
        let j = self.threads[t].rng.random_range(0..f);
        Some(self.select(self.rank(lo) + j))
    }

    /// Whether the faulting bitmap matches the PTEs (mm/check.rs).
    pub fn check(&self, ptes: &[u32], wrprotect: &[u64]) -> std::result::Result<(), String> {
        for vpn in 0..self.pages {
            let bit = self.faulting[vpn as usize / 64] & (1 << (vpn % 64)) != 0;
            if bit != Self::faults(ptes[vpn as usize], wp_bit(wrprotect, vpn)) {
                return Err(format!(
                    "sampled area: page {vpn}'s faulting bit is {bit}, its PTE {:#x}",
                    ptes[vpn as usize]
                ));
            }
        }
        let words = self.faulting.len();
        if self.fen_prefix(words)
            != self
                .faulting
                .iter()
                .map(|w| w.count_ones() as u64)
                .sum::<u64>()
        {
            return Err("sampled area: the Fenwick tree's total is not the bitmap's".into());
        }
        Ok(())
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
        /// rank and select against a count and a scan of the bitmap.
        #[test]
        fn rank_and_select_agree_with_a_scan(bits in proptest::collection::vec(any::<bool>(), 1..700)) {
            let n = bits.len() as u32;
            let (sa, _, _) = area(n, |v| !bits[v as usize]);
            let faulting: Vec<u32> = (0..n).filter(|&v| bits[v as usize]).collect();
            for x in 0..=n {
                prop_assert_eq!(sa.rank(x), faulting.iter().filter(|&&v| v < x).count() as u64);
            }
            for (j, &v) in faulting.iter().enumerate() {
                prop_assert_eq!(sa.select(j as u64), v);
            }
        }
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
            sa.sync(0, 4096, &mut ptes, &[], &mut pmd);
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
            sa.sync(0, 4096, &mut ptes, &[], &mut pmd);
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
        sa.sync(0, 1024, &mut ptes, &[], &mut pmd);
        assert_eq!(ptes[5] & pte::YOUNG, 0);
        assert_eq!(ptes[9], pte::mk_swap(3));
        assert_eq!(young(&ptes), 1022);
        assert_eq!(sa.faulting_in(0), 1);
        sa.check(&ptes, &[]).unwrap();
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
        sa.sync(0, 64, &mut ptes, &wp, &mut pmd);
        assert_eq!(ptes[3] & pte::YOUNG, 0);
        assert_eq!(young(&ptes), 63);
        wp[0] = 0;
        sa.note(3, &mut ptes, &wp, &mut pmd);
        assert_eq!(sa.faulting_in(0), 0);
        sa.threads[0].drawn += 100_000;
        sa.sync(0, 64, &mut ptes, &wp, &mut pmd);
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
    fn segments_follow_spans_and_blocks() {
        // Two threads over 1000 pages: spans [0, 500) and [500, 1000) cut by the block
        // boundary at 512 into [0, 500), [500, 512), [512, 1000). Thread 1's draws touch
        // only its pages.
        let ptes: Vec<u32> = (0..1000)
            .map(|v| pte::mk_present(v + 1, false, false))
            .collect();
        let mut ptes = ptes;
        let mut pmd = vec![0u64];
        let spans = vec![((0, 500), stream(1, 1)), ((500, 1000), stream(1, 2))];
        let mut sa = SampledArea::new(1000, spans, None, &ptes, &[]);
        assert_eq!(sa.seg_start, vec![0, 500, 512]);
        assert_eq!(sa.block_seg, vec![0, 2]);
        sa.threads[1].drawn = 1_000_000;
        sa.sync(0, 1000, &mut ptes, &[], &mut pmd);
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
        sa.sync(600, 601, &mut ptes, &[], &mut pmd);
        assert_eq!(young(&ptes), 0);
        sa.commit(1, 1);
        sa.sync(602, 603, &mut ptes, &[], &mut pmd);
        assert_eq!(
            (ptes[600] & pte::YOUNG, ptes[601], ptes[602] & pte::YOUNG),
            (pte::YOUNG, 0, pte::YOUNG)
        );
        assert_eq!(pmd[0], 0b10);
        // Cleared by a reader, the text stays old until the next write.
        ptes[600] &= !pte::YOUNG;
        sa.sync(600, 601, &mut ptes, &[], &mut pmd);
        assert_eq!(ptes[600] & pte::YOUNG, 0);
        sa.commit(0, 1);
        sa.sync(600, 601, &mut ptes, &[], &mut pmd);
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
