//! The block pool's per-kind lists of free blocks, in the manner of the
//! kernel's per-CPU page lists: a block freed by its last user goes on its
//! kind's list, and a request is served from there without a call into the
//! buddy allocator. A list is filled a batch at a time when it runs dry, and
//! gives back its oldest batch when it grows past its high mark, so the
//! allocator is called once per batch, not once per block.
//!
//! The blocks on these lists are still allocated in the buddy allocator:
//! they cannot merge with their buddies into a larger kind's block. So they
//! are given back in full whenever memory is short (the pool's shrinker, a
//! failed allocation, `drain`), as the kernel drains its per-CPU lists
//! before it fails an allocation.
//!
//! Plain data, no locking: the pool keeps it inside its state, under its lock.

/// Per kind, a stack of free block ids (the hottest, last freed, on top).
#[derive(Default, Debug)]
pub(crate) struct FreeLists {
    lists: Vec<Vec<u64>>,
    /// Per kind: the most blocks a list keeps (0: the list is off).
    high: Vec<usize>,
    /// Per kind: the blocks one refill asks for and one spill gives back.
    batch: Vec<usize>,
    orders: Vec<u32>,
    /// Frames on all lists.
    frames: u64,
}

impl FreeLists {
    /// Lists for kinds of `orders`, each keeping at most `high_frames`
    /// frames (a kind whose block is larger gets no list).
    pub(crate) fn new(orders: &[u32], high_frames: u64) -> Self {
        let high: Vec<usize> =
            orders.iter().map(|&o| usize::try_from(high_frames >> o).unwrap_or(usize::MAX)).collect();
        // A quarter of the high mark, as the kernel's batch is a fraction of
        // its `high`: a refill then a burst of frees stays under the mark.
        let batch = high.iter().map(|&h| if h == 0 { 0 } else { (h / 4).max(1) }).collect();
        FreeLists { lists: vec![Vec::new(); orders.len()], high, batch, orders: orders.to_vec(), frames: 0 }
    }

    /// Turn kind `k`'s list off (its blocks then go straight back).
    pub(crate) fn disable(&mut self, k: usize) {
        self.high[k] = 0;
        self.batch[k] = 0;
    }

    /// Frames on all lists.
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// Free blocks on kind `k`'s list.
    pub(crate) fn len(&self, k: usize) -> usize {
        self.lists[k].len()
    }

    /// Blocks a refill of kind `k`'s list asks for (0: the list is off).
    pub(crate) fn batch(&self, k: usize) -> usize {
        self.batch[k]
    }

    /// Move up to `n` blocks of kind `k`, hottest first, onto `out`.
    pub(crate) fn take(&mut self, k: usize, n: usize, out: &mut Vec<u64>) {
        let list = &mut self.lists[k];
        let n = n.min(list.len());
        out.extend(list.drain(list.len() - n..).rev());
        self.frames -= (n as u64) << self.orders[k];
    }

    /// Keep free block `id` of kind `k`; false when the list is off (the
    /// caller gives it back to the allocator).
    pub(crate) fn put(&mut self, k: usize, id: u64) -> bool {
        if self.high[k] == 0 {
            return false;
        }
        self.lists[k].push(id);
        self.frames += 1 << self.orders[k];
        true
    }

    /// When kind `k`'s list is over its high mark, its oldest batch (taken
    /// off the list), for the caller to give back; otherwise nothing.
    pub(crate) fn spill(&mut self, k: usize) -> Vec<u64> {
        let list = &mut self.lists[k];
        if list.len() <= self.high[k] {
            return Vec::new();
        }
        let n = (list.len() - self.high[k]).max(self.batch[k]).min(list.len());
        self.frames -= (n as u64) << self.orders[k];
        list.drain(..n).collect()
    }

    /// Every list emptied: per kind, its blocks and their order.
    pub(crate) fn drain(&mut self) -> Vec<(Vec<u64>, u32)> {
        self.frames = 0;
        self.lists.iter_mut().zip(&self.orders).map(|(l, &o)| (std::mem::take(l), o)).collect()
    }

    /// Every block on the lists, with its kind.
    pub(crate) fn ids(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.lists.iter().enumerate().flat_map(|(k, l)| l.iter().map(move |&id| (id, k)))
    }

    /// The frame count against the lists, and no list over its mark.
    pub(crate) fn check(&self) -> Result<(), String> {
        let frames: u64 = self.lists.iter().zip(&self.orders).map(|(l, &o)| (l.len() as u64) << o).sum();
        if frames != self.frames {
            return Err(format!("free-list frames drifted: {} counted, {frames} on the lists", self.frames));
        }
        if let Some(k) = (0..self.lists.len()).find(|&k| self.lists[k].len() > self.high[k]) {
            return Err(format!(
                "the free list of kind {k} holds {} blocks, over its mark {}",
                self.lists[k].len(),
                self.high[k]
            ));
        }
        Ok(())
    }
}
