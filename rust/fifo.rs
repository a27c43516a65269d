// SPDX-License-Identifier: GPL-2.0

//! A bounded FIFO with its room allocated up front: pushing never allocates,
//! so it works under a spinlock and in any context, and its bound is the
//! backpressure (a full packet queue drops, as a NIC would).

use kernel::prelude::*;

pub(crate) struct Fifo<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Fifo<T> {
    pub(crate) fn new(capacity: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Fifo {
            slots,
            head: 0,
            len: 0,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot of entry `i < len` (`head < cap` and `len <= cap`, so one
    /// wrap at most: no division, which could panic).
    fn slot(&self, i: usize) -> usize {
        let j = self.head + i;
        if j >= self.slots.len() {
            j - self.slots.len()
        } else {
            j
        }
    }

    /// Appends `v`, or gives it back when full.
    pub(crate) fn push(&mut self, v: T) -> Result<(), T> {
        if self.len >= self.slots.len() {
            return Err(v);
        }
        let i = self.slot(self.len);
        match self.slots.get_mut(i) {
            Some(s) => {
                *s = Some(v);
                self.len += 1;
                Ok(())
            }
            None => Err(v),
        }
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        let v = self.slots.get_mut(i).and_then(Option::take);
        self.head = self.slot(1);
        self.len -= 1;
        v
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        self.slots.get(self.slot(i)).and_then(Option::as_ref)
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let j = self.slot(i);
        self.slots.get_mut(j).and_then(Option::as_mut)
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub(crate) fn front_mut(&mut self) -> Option<&mut T> {
        self.get_mut(0)
    }

    pub(crate) fn clear(&mut self) {
        while self.pop().is_some() {}
        self.head = 0;
    }
}
