//! The state byte of a slot that a SIGSEGV handler and normal code change together: profile's
//! armed ranges (`profile/watch`) and enforce's guarded views (`enforce/guard/`). Each names
//! its states in an enum made by [`slot_states!`]; [`StateCell`] holds one as an `AtomicU8`, so
//! a handler reads and exchanges it without a lock, and a state that does not exist cannot be
//! written or matched.
// Reached from the SIGSEGV handler: nothing here may panic (issue 44).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::indexing_slicing
    )
)]

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};

/// The states of one kind of slot (made by [`slot_states!`]).
pub trait SlotState: Copy + Eq {
    fn from_raw(v: u8) -> Self;
    fn to_raw(self) -> u8;
}

/// Defines a `#[repr(u8)]` enum of slot states numbered from 0 (the first is the state of a
/// fresh slot) and its [`SlotState`] conversion.
macro_rules! slot_states {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name { $($(#[$vm])* $v),+ }

        impl $crate::hostmem::slot_state::SlotState for $name {
            #[inline]
            fn from_raw(v: u8) -> Self {
                const ALL: &[$name] = &[$($name::$v),+];
                // Only `StateCell` writes the byte, and only from a `$name`: every value is one.
                // (`ALL` is never empty: an enum of at least one state.)
                #[allow(clippy::indexing_slicing)]
                ALL.get(v as usize).copied().unwrap_or(ALL[0])
            }
            #[inline]
            fn to_raw(self) -> u8 {
                self as u8
            }
        }
    };
}
pub(crate) use slot_states;

/// One slot's state, shared with a signal handler.
pub struct StateCell<S> {
    raw: AtomicU8,
    _states: PhantomData<S>,
}

impl<S: SlotState> StateCell<S> {
    /// A cell in state `initial as u8` (const: slot tables are statics).
    pub const fn new(initial: u8) -> StateCell<S> {
        StateCell {
            raw: AtomicU8::new(initial),
            _states: PhantomData,
        }
    }

    #[inline]
    pub fn load(&self, order: Ordering) -> S {
        S::from_raw(self.raw.load(order))
    }

    #[inline]
    pub fn store(&self, s: S, order: Ordering) {
        self.raw.store(s.to_raw(), order)
    }

    #[inline]
    pub fn compare_exchange(
        &self,
        current: S,
        new: S,
        success: Ordering,
        failure: Ordering,
    ) -> Result<S, S> {
        self.raw
            .compare_exchange(current.to_raw(), new.to_raw(), success, failure)
            .map(S::from_raw)
            .map_err(S::from_raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    slot_states! {
        enum Demo { Free, Busy, Open }
    }

    #[test]
    fn states_round_trip_and_exchange() {
        let c: StateCell<Demo> = StateCell::new(Demo::Free as u8);
        assert_eq!(c.load(Ordering::Relaxed), Demo::Free);
        assert_eq!(
            c.compare_exchange(Demo::Free, Demo::Busy, Ordering::AcqRel, Ordering::Relaxed),
            Ok(Demo::Free)
        );
        assert_eq!(
            c.compare_exchange(Demo::Free, Demo::Open, Ordering::AcqRel, Ordering::Relaxed),
            Err(Demo::Busy)
        );
        c.store(Demo::Open, Ordering::Release);
        assert_eq!(c.load(Ordering::Acquire), Demo::Open);
    }
}
