//! Dense entity indices (Cranelift's habit): a temp or a block is a `u32` newtype, and maps keyed
//! by them are plain `Vec`s.

use std::fmt;

macro_rules! entity {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(pub u32);

        impl $name {
            /// The dense index of this entity.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The entity with dense index `index`.
            #[inline]
            pub fn new(index: usize) -> Self {
                Self(u32::try_from(index).expect("entity index overflows u32"))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value: defined once, lives in a register class.
    Temp,
    "%"
);
entity!(
    /// A basic block of a function.
    Block,
    "bb"
);
