//! The guest's network, host side (docs/network.md): the policy comes
//! from `withholding::network`; [`proxy`] decides and carries each
//! request; [`process`] runs it in a process of its own, outside the
//! VMM's jail and under its own seccomp filter.

pub mod process;
pub mod proxy;
